// SPDX-License-Identifier: BSD-3-Clause
#include "control/stats.h"

#include <cstdio>
#include <string_view>

#include "control/stats_fields.h"

namespace nscache::control {
namespace {

std::string number(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4f", v);
    return buf;
}

std::string milliseconds(uint64_t us) {
    if (us == UINT64_MAX) return "inf";
    return number(static_cast<double>(us) / 1000.0);
}

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
        if (c == '"' || c == '\\') {
            out += '\\';
            out += c;
        } else if (static_cast<unsigned char>(c) < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
            out += buf;
        } else {
            out += c;
        }
    }
    return out;
}

// A field's value in the text output: the nscd_<db>_plan gauges by name (their codes need a
// table to read), every other one as its number.
std::string text_value(std::string_view name, uint64_t value) {
    const bool plan = name.starts_with("nscd_") && name.ends_with("_plan");
    return plan ? nscd_plan_name(value) : std::to_string(value);
}

double mean_ms(const LatencySnapshot& l) {
    const uint64_t n = l.count();
    return n == 0 ? 0.0 : static_cast<double>(l.sum_us) / 1000.0 / static_cast<double>(n);
}

std::string latency_text(const LatencySnapshot& l) {
    return "count=" + std::to_string(l.count()) + " mean_ms=" + number(mean_ms(l)) +
           " p50_ms=" + milliseconds(l.quantile_bound_us(0.5)) +
           " p99_ms=" + milliseconds(l.quantile_bound_us(0.99));
}

std::string latency_json(const LatencySnapshot& l) {
    std::string buckets = "[";
    for (uint64_t b : l.buckets) {
        if (buckets.size() > 1) buckets += ", ";
        buckets += std::to_string(b);
    }
    return "{\"count\": " + std::to_string(l.count()) +
           ", \"sum_us\": " + std::to_string(l.sum_us) + ", \"buckets\": " + buckets + "]}";
}

}  // namespace

std::function<std::vector<UpstreamGroupSource>()> single_upstream_group(
    const upstream::UpstreamSet& set) {
    // Not owned: the caller keeps the set alive (the daemon's, for its whole run).
    std::shared_ptr<const upstream::UpstreamSet> view(&set, [](const upstream::UpstreamSet*) {});
    return [view] { return std::vector<UpstreamGroupSource>{{".", view}}; };
}

UpstreamGroupStats collect_group(const std::string& name, const upstream::UpstreamSet& set) {
    UpstreamGroupStats g;
    g.name = name;
    g.questions = set.counters().questions.load(std::memory_order_relaxed);
    g.failures = set.counters().failures.load(std::memory_order_relaxed);
    for (size_t i = 0; i < set.size(); ++i) {
        const upstream::UpstreamServer& u = set.at(i);
        UpstreamStats s;
        s.address = u.address.to_string();
#define NSCACHE_UPSTREAM_READ(name, help) s.name = u.name.load(std::memory_order_relaxed);
        NSCACHE_UPSTREAM_COUNTERS(NSCACHE_UPSTREAM_READ)
#undef NSCACHE_UPSTREAM_READ
        s.srtt_ms = u.srtt_us.load(std::memory_order_relaxed) / 1000.0;
        s.up = !u.down.load(std::memory_order_relaxed);
        g.servers.push_back(std::move(s));
    }
    return g;
}

StatsSnapshot collect_stats(const StatsSources& sources, uint64_t now_ms) {
    StatsSnapshot s;
    for (const WorkerCounters& w : sources.workers) {
#define NSCACHE_SUM_FIELD(name, help) s.name += w.name.load(std::memory_order_relaxed);
        NSCACHE_WORKER_COUNTERS(NSCACHE_SUM_FIELD)
        NSCACHE_WORKER_GAUGES(NSCACHE_SUM_FIELD)
#undef NSCACHE_SUM_FIELD
        for (size_t i = 0; i < kAnswerSources; ++i) s.latency[i].add(w.latency[i]);
        s.shared_latency.add(w.shared_latency);
    }
    // A hit is answered in the loop turn that read it: on the loop's clock, zero. The hit path
    // writes no bucket for it; its counter is the bucket.
    s.latency[static_cast<size_t>(AnswerSource::cache)].buckets[0] += s.cache_hits;
    if (sources.cache != nullptr) s.cache = sources.cache->counters();
    if (sources.shared_tier != nullptr) s.shared_state = sources.shared_tier->state();
    const uint64_t lookups = s.cache_hits + s.cache_misses;
    s.hit_ratio =
        lookups == 0 ? 0.0 : static_cast<double>(s.cache_hits) / static_cast<double>(lookups);
    s.uptime_s = (now_ms - sources.started_ms) / 1000;
    if (sources.upstream_groups) {
        for (const UpstreamGroupSource& g : sources.upstream_groups()) {
            if (g.servers) s.upstream_groups.push_back(collect_group(g.name, *g.servers));
        }
    }
    return s;
}

std::string format_text(const StatsSnapshot& s) {
    std::string out;
    auto line = [&](const std::string& name, const std::string& value) {
        out += name + " " + value + "\n";
    };
#define NSCACHE_TEXT_FIELD(name, help) line(#name, text_value(#name, s.name));
    NSCACHE_WORKER_COUNTERS(NSCACHE_TEXT_FIELD)
    NSCACHE_WORKER_GAUGES(NSCACHE_TEXT_FIELD)
#undef NSCACHE_TEXT_FIELD
    line("shared_cache_state", state_name(s.shared_state));
    line("hit_ratio", number(s.hit_ratio));
    for (const auto& f : kCacheFields) line(f.name, std::to_string(s.cache.*f.field));
    line("uptime_seconds", std::to_string(s.uptime_s));
    for (size_t i = 0; i < kAnswerSources; ++i) {
        line(std::string("latency_") + kAnswerSourceNames[i], latency_text(s.latency[i]));
    }
    line("shared_lookup_latency", latency_text(s.shared_latency));
    for (const auto& g : s.upstream_groups) {
        line("forward " + g.name, "questions=" + std::to_string(g.questions) +
                                      " failures=" + std::to_string(g.failures));
    }
    for (const auto& g : s.upstream_groups) {
        for (const auto& u : g.servers) {
            std::string value = "forward=" + g.name + " srtt_ms=" + number(u.srtt_ms);
#define NSCACHE_UPSTREAM_TEXT(name, help) value += " " #name "=" + std::to_string(u.name);
            NSCACHE_UPSTREAM_COUNTERS(NSCACHE_UPSTREAM_TEXT)
#undef NSCACHE_UPSTREAM_TEXT
            line("upstream " + u.address, value + (u.up ? " up" : " down"));
        }
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
    NSCACHE_WORKER_GAUGES(NSCACHE_JSON_FIELD)
#undef NSCACHE_JSON_FIELD
    field("shared_cache_state", std::string("\"") + state_name(s.shared_state) + "\"");
    field("hit_ratio", number(s.hit_ratio));
    for (const auto& f : kCacheFields) field(f.name, std::to_string(s.cache.*f.field));
    field("uptime_seconds", std::to_string(s.uptime_s));

    std::string bounds = "[";
    for (uint64_t b : kLatencyBoundsUs) {
        if (bounds.size() > 1) bounds += ", ";
        bounds += std::to_string(b);
    }
    field("latency_bucket_bounds_us", bounds + "]");
    std::string latency = "{";
    for (size_t i = 0; i < kAnswerSources; ++i) {
        if (latency.size() > 1) latency += ", ";
        latency += std::string("\"") + kAnswerSourceNames[i] + "\": " + latency_json(s.latency[i]);
    }
    field("answer_latency", latency + "}");
    field("shared_lookup_latency", latency_json(s.shared_latency));

    std::string forwards = "[";
    std::string upstreams = "[";
    for (const auto& g : s.upstream_groups) {
        if (forwards.size() > 1) forwards += ", ";
        forwards += "{\"name\": \"" + json_escape(g.name) +
                    "\", \"questions\": " + std::to_string(g.questions) +
                    ", \"failures\": " + std::to_string(g.failures) + "}";
        for (const auto& u : g.servers) {
            if (upstreams.size() > 1) upstreams += ", ";
            upstreams += "{\"address\": \"" + json_escape(u.address) + "\", \"forward\": \"" +
                         json_escape(g.name) + "\", \"srtt_ms\": " + number(u.srtt_ms);
#define NSCACHE_UPSTREAM_JSON(name, help) upstreams += ", \"" #name "\": " + std::to_string(u.name);
            NSCACHE_UPSTREAM_COUNTERS(NSCACHE_UPSTREAM_JSON)
#undef NSCACHE_UPSTREAM_JSON
            upstreams += std::string(", \"up\": ") + (u.up ? "true" : "false") + "}";
        }
    }
    field("forwards", forwards + "]");
    field("upstreams", upstreams + "]");
    return out + "}\n";
}

}  // namespace nscache::control
