#include "control/stats.h"

#include <cstdio>

namespace nscache::control {
namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

// The cache's counters, after the workers' in every format.
struct CacheField {
    const char* name;
    const char* help;
    uint64_t cache::CacheCounters::*field;
};
constexpr CacheField kCacheFields[] = {
    {"cache_entries", "entries held now", &cache::CacheCounters::entries},
    {"cache_bytes", "bytes the cache accounts for now", &cache::CacheCounters::bytes},
    {"cache_budget_bytes", "the cache's byte budget", &cache::CacheCounters::budget},
    {"evictions", "entries removed to stay within the budget", &cache::CacheCounters::evictions},
    {"expirations", "expired entries reclaimed", &cache::CacheCounters::expirations},
    {"cache_inserts", "answers stored", &cache::CacheCounters::inserts},
};

const char* state_name(SharedTierState state) {
    switch (state) {
        case SharedTierState::Up:
            return "up";
        case SharedTierState::Degraded:
            return "degraded";
        case SharedTierState::Down:
            return "down";
        case SharedTierState::Off:
            break;
    }
    return "off";
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

}  // namespace

StatsSnapshot collect_stats(const StatsSources& sources, uint64_t now_ms) {
    StatsSnapshot s;
    for (const WorkerCounters& w : sources.workers) {
#define NSCACHE_SUM_FIELD(name, help) s.name += w.name.load(std::memory_order_relaxed);
        NSCACHE_WORKER_COUNTERS(NSCACHE_SUM_FIELD)
#undef NSCACHE_SUM_FIELD
        for (size_t i = 0; i < kSharedLatencyBuckets; ++i) {
            s.shared_latency_buckets[i] +=
                w.shared_latency_buckets[i].load(std::memory_order_relaxed);
        }
    }
    if (sources.cache != nullptr) s.cache = sources.cache->counters();
    if (sources.shared_tier != nullptr) s.shared_state = sources.shared_tier->state();
    const uint64_t lookups = s.cache_hits + s.cache_misses;
    s.hit_ratio =
        lookups == 0 ? 0.0 : static_cast<double>(s.cache_hits) / static_cast<double>(lookups);
    s.uptime_s = (now_ms - sources.started_ms) / 1000;
    if (sources.upstreams != nullptr) {
        for (size_t i = 0; i < sources.upstreams->size(); ++i) {
            const auto& u = sources.upstreams->at(i);
            s.upstreams.push_back(UpstreamStats{u.address.to_string(),
                                                u.srtt_us.load(std::memory_order_relaxed) / 1000.0,
                                                u.queries.load(std::memory_order_relaxed),
                                                u.timeouts.load(std::memory_order_relaxed),
                                                !u.down.load(std::memory_order_relaxed)});
        }
    }
    return s;
}

std::string format_text(const StatsSnapshot& s) {
    std::string out;
    auto line = [&](const std::string& name, const std::string& value) {
        out += name + " " + value + "\n";
    };
#define NSCACHE_TEXT_FIELD(name, help) line(#name, std::to_string(s.name));
    NSCACHE_WORKER_COUNTERS(NSCACHE_TEXT_FIELD)
#undef NSCACHE_TEXT_FIELD
    line("shared_cache_state", state_name(s.shared_state));
    line("hit_ratio", number(s.hit_ratio));
    for (const auto& f : kCacheFields) line(f.name, std::to_string(s.cache.*f.field));
    line("uptime_seconds", std::to_string(s.uptime_s));
    for (const auto& u : s.upstreams) {
        line("upstream " + u.address,
             "srtt_ms=" + number(u.srtt_ms) + " queries=" + std::to_string(u.queries) +
                 " timeouts=" + std::to_string(u.timeouts) + (u.up ? " up" : " down"));
    }
    return out;
}

std::string format_json(const StatsSnapshot& s) {
    std::string out = "{";
    auto field = [&](const std::string& name, const std::string& value) {
        if (out.size() > 1) out += ", ";
        out += "\"" + name + "\": " + value;
    };
#define NSCACHE_JSON_FIELD(name, help) field(#name, std::to_string(s.name));
    NSCACHE_WORKER_COUNTERS(NSCACHE_JSON_FIELD)
#undef NSCACHE_JSON_FIELD
    field("shared_cache_state", std::string("\"") + state_name(s.shared_state) + "\"");
    field("hit_ratio", number(s.hit_ratio));
    for (const auto& f : kCacheFields) field(f.name, std::to_string(s.cache.*f.field));
    field("uptime_seconds", std::to_string(s.uptime_s));
    std::string list = "[";
    for (const auto& u : s.upstreams) {
        if (list.size() > 1) list += ", ";
        list += "{\"address\": \"" + json_escape(u.address) +
                "\", \"srtt_ms\": " + number(u.srtt_ms) +
                ", \"queries\": " + std::to_string(u.queries) +
                ", \"timeouts\": " + std::to_string(u.timeouts) +
                ", \"up\": " + (u.up ? "true" : "false") + "}";
    }
    field("upstreams", list + "]");
    return out + "}\n";
}

std::string format_prometheus(const StatsSnapshot& s) {
    std::string out;
    auto metric = [&](const std::string& name, const char* help, const char* type,
                      const std::string& value) {
        out += "# HELP nscache_" + name + " " + help + "\n";
        out += "# TYPE nscache_" + name + " " + type + "\n";
        out += "nscache_" + name + " " + value + "\n";
    };
#define NSCACHE_PROM_FIELD(name, help) \
    metric(#name "_total", help, "counter", std::to_string(s.name));
    NSCACHE_WORKER_COUNTERS(NSCACHE_PROM_FIELD)
#undef NSCACHE_PROM_FIELD
    for (const auto& f : kCacheFields) {
        const bool gauge = f.field == &cache::CacheCounters::entries ||
                           f.field == &cache::CacheCounters::bytes ||
                           f.field == &cache::CacheCounters::budget;
        metric(gauge ? f.name : std::string(f.name) + "_total", f.help, gauge ? "gauge" : "counter",
               std::to_string(s.cache.*f.field));
    }
    metric("uptime_seconds", "seconds since start", "gauge", std::to_string(s.uptime_s));
    metric("shared_cache_state", "shared tier: 0 off, 1 up, 2 degraded (some nodes down), 3 down",
           "gauge", std::to_string(static_cast<int>(s.shared_state)));
    out += "# HELP nscache_shared_lookup_seconds shared-tier lookups that got a reply, by wait\n";
    out += "# TYPE nscache_shared_lookup_seconds histogram\n";
    uint64_t cumulative = 0;
    for (size_t i = 0; i < kSharedLatencyBuckets; ++i) {
        cumulative += s.shared_latency_buckets[i];
        char le[32] = "+Inf";
        if (i < std::size(kSharedLatencyBoundsUs)) {
            std::snprintf(le, sizeof le, "%g",
                          static_cast<double>(kSharedLatencyBoundsUs[i]) / 1e6);
        }
        out += std::string("nscache_shared_lookup_seconds_bucket{le=\"") + le + "\"} " +
               std::to_string(cumulative) + "\n";
    }
    char sum[32];
    std::snprintf(sum, sizeof sum, "%.6f", static_cast<double>(s.shared_latency_us) / 1e6);
    out += std::string("nscache_shared_lookup_seconds_sum ") + sum + "\n";
    out += "nscache_shared_lookup_seconds_count " + std::to_string(cumulative) + "\n";
    out += "# HELP nscache_upstream_srtt_seconds smoothed round-trip time per upstream\n";
    out += "# TYPE nscache_upstream_srtt_seconds gauge\n";
    for (const auto& u : s.upstreams) {
        out += "nscache_upstream_srtt_seconds{upstream=\"" + u.address + "\"} " +
               number(u.srtt_ms / 1000.0) + "\n";
    }
    out += "# HELP nscache_upstream_up whether the upstream is considered healthy\n";
    out += "# TYPE nscache_upstream_up gauge\n";
    for (const auto& u : s.upstreams) {
        out += "nscache_upstream_up{upstream=\"" + u.address + "\"} " + (u.up ? "1" : "0") + "\n";
    }
    return out;
}

}  // namespace nscache::control
