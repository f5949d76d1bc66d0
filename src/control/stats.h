// Statistics as the control socket and the metrics endpoint show them: the workers' counters
// summed, the cache's own counters and each upstream's health. Names come from the single
// list in common/counters.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <functional>
#include <memory>
#include "cache/cache.h"
#include "common/counters.h"

#include "upstream/routing.h"

namespace nscache::control {

struct UpstreamStats {
    std::string address;
    double srtt_ms = 0;
    uint64_t queries = 0;
    uint64_t timeouts = 0;
    bool up = true;
};

struct StatsSnapshot {
#define NSCACHE_SNAPSHOT_FIELD(name, help) uint64_t name = 0;
    NSCACHE_WORKER_COUNTERS(NSCACHE_SNAPSHOT_FIELD)
#undef NSCACHE_SNAPSHOT_FIELD
    cache::CacheCounters cache;
    double hit_ratio = 0;
    uint64_t uptime_s = 0;
    std::vector<UpstreamStats> upstreams;
};

// What the stats need to read; all of it is safe to read from any thread.
struct StatsSources {
    std::span<const WorkerCounters> workers;
    const cache::Cache* cache = nullptr;
    // The routing in force now (it changes with reloads): its upstream servers.
    std::function<std::shared_ptr<const upstream::Routing>()> routing;
    uint64_t started_ms = 0;
};

StatsSnapshot collect_stats(const StatsSources& sources, uint64_t now_ms);

std::string format_text(const StatsSnapshot& s);
std::string format_json(const StatsSnapshot& s);
std::string format_prometheus(const StatsSnapshot& s);

}  // namespace nscache::control
