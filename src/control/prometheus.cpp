// SPDX-License-Identifier: BSD-3-Clause
// format_prometheus (control/stats.h): the Prometheus text exposition format, version 0.0.4.
// Counters end in _total, levels are gauges, answer latency is one histogram labelled by
// source, and per-group and per-server series carry `forward` and `upstream` labels (per
// server: nscache_upstream_server_*, apart from the workers' nscache_upstream_* totals).
#include <cstdio>

#include "control/stats.h"
#include "control/stats_fields.h"

namespace nscache::control {
namespace {

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.6f", s);
    return buf;
}

// A bucket bound as Prometheus clients write it: 0.0001, 0.00025, ..., 1, 2.5, 5.
std::string bound(uint64_t us) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", static_cast<double>(us) / 1e6);
    return buf;
}

// Label values escape backslash, double quote and newline.
std::string label(const std::string& value) {
    std::string out;
    for (char c : value) {
        if (c == '\\' || c == '"') {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out += c;
        }
    }
    return out;
}

class Exposition {
  public:
    void family(const std::string& name, const char* help, const char* type) {
        out_ += "# HELP nscache_" + name + " " + help + "\n";
        out_ += "# TYPE nscache_" + name + " " + type + "\n";
    }
    void sample(const std::string& name, const std::string& labels, const std::string& value) {
        out_ += "nscache_" + name + (labels.empty() ? "" : "{" + labels + "}") + " " + value + "\n";
    }
    std::string take() { return std::move(out_); }

  private:
    std::string out_;
};

void latency(Exposition& e, const StatsSnapshot& s) {
    e.family("answer_latency_seconds",
             "time from reading a query to sending its answer, by where the answer came from "
             "(cache: counted at 0, answered in the loop turn that read it)",
             "histogram");
    for (size_t i = 0; i < kAnswerSources; ++i) {
        const LatencySnapshot& l = s.latency[i];
        const std::string source = std::string("source=\"") + kAnswerSourceNames[i] + "\"";
        uint64_t cumulative = 0;
        for (size_t b = 0; b < std::size(kLatencyBoundsUs); ++b) {
            cumulative += l.buckets[b];
            e.sample("answer_latency_seconds_bucket",
                     source + ",le=\"" + bound(kLatencyBoundsUs[b]) + "\"",
                     std::to_string(cumulative));
        }
        e.sample("answer_latency_seconds_bucket", source + ",le=\"+Inf\"",
                 std::to_string(l.count()));
        e.sample("answer_latency_seconds_sum", source,
                 seconds(static_cast<double>(l.sum_us) / 1e6));
        e.sample("answer_latency_seconds_count", source, std::to_string(l.count()));
    }
}

void histogram(Exposition& e, const std::string& name, const std::string& labels,
               const LatencySnapshot& l) {
    const std::string sep = labels.empty() ? "" : labels + ",";
    uint64_t cumulative = 0;
    for (size_t b = 0; b < std::size(kLatencyBoundsUs); ++b) {
        cumulative += l.buckets[b];
        e.sample(name + "_bucket", sep + "le=\"" + bound(kLatencyBoundsUs[b]) + "\"",
                 std::to_string(cumulative));
    }
    e.sample(name + "_bucket", sep + "le=\"+Inf\"", std::to_string(l.count()));
    e.sample(name + "_sum", labels, seconds(static_cast<double>(l.sum_us) / 1e6));
    e.sample(name + "_count", labels, std::to_string(l.count()));
}

void shared_tier(Exposition& e, const StatsSnapshot& s) {
    e.family("shared_cache_state",
             "the shared tier in Redis: 0 off, 1 up, 2 degraded (some nodes marked down), 3 down",
             "gauge");
    e.sample("shared_cache_state", "", std::to_string(static_cast<int>(s.shared_state)));
    e.family("shared_lookup_seconds", "how long shared-tier lookups that got a reply waited",
             "histogram");
    histogram(e, "shared_lookup_seconds", "", s.shared_latency);
}

void upstream_groups(Exposition& e, const StatsSnapshot& s) {
    e.family("forward_questions_total",
             "questions sent to a group of upstream servers (the default group \".\" or a "
             "forwarding rule's), after the cache and coalescing",
             "counter");
    for (const auto& g : s.upstream_groups) {
        e.sample("forward_questions_total", "forward=\"" + label(g.name) + "\"",
                 std::to_string(g.questions));
    }
    e.family("forward_failures_total",
             "questions to a group that ended without a NOERROR or NXDOMAIN answer", "counter");
    for (const auto& g : s.upstream_groups) {
        e.sample("forward_failures_total", "forward=\"" + label(g.name) + "\"",
                 std::to_string(g.failures));
    }

    auto each_server = [&](const std::string& name, auto value) {
        for (const auto& g : s.upstream_groups) {
            for (const auto& u : g.servers) {
                e.sample(name,
                         "forward=\"" + label(g.name) + "\",upstream=\"" + label(u.address) + "\"",
                         value(u));
            }
        }
    };
#define NSCACHE_UPSTREAM_PROM(name, help)                         \
    e.family("upstream_server_" #name "_total", help, "counter"); \
    each_server("upstream_server_" #name "_total",                \
                [](const UpstreamStats& u) { return std::to_string(u.name); });
    NSCACHE_UPSTREAM_COUNTERS(NSCACHE_UPSTREAM_PROM)
#undef NSCACHE_UPSTREAM_PROM
    e.family("upstream_server_srtt_seconds", "smoothed round-trip time per upstream server",
             "gauge");
    each_server("upstream_server_srtt_seconds",
                [](const UpstreamStats& u) { return seconds(u.srtt_ms / 1000.0); });
    e.family("upstream_server_up",
             "1 while the upstream server is considered healthy, 0 while marked down", "gauge");
    each_server("upstream_server_up",
                [](const UpstreamStats& u) { return std::string(u.up ? "1" : "0"); });
}

}  // namespace

std::string format_prometheus(const StatsSnapshot& s) {
    Exposition e;
#define NSCACHE_PROM_FIELD(name, help)         \
    e.family(#name "_total", help, "counter"); \
    e.sample(#name "_total", "", std::to_string(s.name));
    NSCACHE_WORKER_COUNTERS(NSCACHE_PROM_FIELD)
#undef NSCACHE_PROM_FIELD
#define NSCACHE_PROM_GAUGE(name, help) \
    e.family(#name, help, "gauge");    \
    e.sample(#name, "", std::to_string(s.name));
    NSCACHE_WORKER_GAUGES(NSCACHE_PROM_GAUGE)
#undef NSCACHE_PROM_GAUGE
    for (const auto& f : kCacheFields) {
        const std::string name = f.gauge ? f.name : std::string(f.name) + "_total";
        e.family(name, f.help, f.gauge ? "gauge" : "counter");
        e.sample(name, "", std::to_string(s.cache.*f.field));
    }
    e.family("uptime_seconds", "seconds since start", "gauge");
    e.sample("uptime_seconds", "", std::to_string(s.uptime_s));
    latency(e, s);
    shared_tier(e, s);
    upstream_groups(e, s);
    return e.take();
}

}  // namespace nscache::control
