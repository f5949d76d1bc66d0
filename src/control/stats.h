// Statistics as the control socket and the metrics endpoint show them: the workers' counters
// summed, the cache's own counters and each upstream's health. Names come from the single
// list in common/counters.h.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "common/counters.h"
#include "sharedcache/tier_health.h"
#include "upstream/upstream_set.h"

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
    uint64_t shared_latency_buckets[kSharedLatencyBuckets] = {};
    // Up when no Redis node is marked down, down when all are, degraded in between; off
    // without [shared-cache].
    SharedTierState shared_state = SharedTierState::Off;
    cache::CacheCounters cache;
    double hit_ratio = 0;
    uint64_t uptime_s = 0;
    std::vector<UpstreamStats> upstreams;
};

// What the stats need to read; all of it is safe to read from any thread.
struct StatsSources {
    std::span<const WorkerCounters> workers;
    const cache::Cache* cache = nullptr;
    const upstream::UpstreamSet* upstreams = nullptr;
    uint64_t started_ms = 0;
    const sharedcache::TierHealth* shared_tier = nullptr;
};

StatsSnapshot collect_stats(const StatsSources& sources, uint64_t now_ms);

std::string format_text(const StatsSnapshot& s);
std::string format_json(const StatsSnapshot& s);
std::string format_prometheus(const StatsSnapshot& s);

}  // namespace nscache::control
