// SPDX-License-Identifier: BSD-3-Clause
// Statistics as the control socket and the metrics endpoint show them: the workers' counters
// and latency histograms summed, the cache's own counters, and per group of upstream servers
// (the default set, and each forwarding rule's) what was asked of it and each server's health.
// Names come from the single lists in common/counters.h, common/latency_histogram.h and below.
// collect_stats() runs on the control thread; every source it reads is safe to read from there.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "common/counters.h"
#include "common/latency_histogram.h"
#include "sharedcache/tier_health.h"
#include "upstream/upstream_set.h"

namespace nscache::control {

// X(name, help): the counters of each upstream server (upstream::UpstreamServer's fields).
#define NSCACHE_UPSTREAM_COUNTERS(X)                                                  \
    X(queries, "queries sent to this upstream server, UDP and TCP, retries included") \
    X(answers, "answers from this server that matched a query")                       \
    X(errors, "of these, error answers (SERVFAIL, REFUSED...) or malformed ones")     \
    X(timeouts, "queries this server did not answer in time")

struct UpstreamStats {
    std::string address;
#define NSCACHE_UPSTREAM_FIELD(name, help) uint64_t name = 0;
    NSCACHE_UPSTREAM_COUNTERS(NSCACHE_UPSTREAM_FIELD)
#undef NSCACHE_UPSTREAM_FIELD
    double srtt_ms = 0;
    bool up = true;
};

// One set of upstream servers: the default set, named ".", or a forwarding rule's.
struct UpstreamGroupStats {
    std::string name;
    uint64_t questions = 0;  // questions sent to the set (after the cache and coalescing)
    uint64_t failures = 0;   // of these, ended without a NOERROR or NXDOMAIN answer
    std::vector<UpstreamStats> servers;
};

struct StatsSnapshot {
#define NSCACHE_SNAPSHOT_FIELD(name, help) uint64_t name = 0;
    NSCACHE_WORKER_COUNTERS(NSCACHE_SNAPSHOT_FIELD)
    NSCACHE_WORKER_GAUGES(NSCACHE_SNAPSHOT_FIELD)
#undef NSCACHE_SNAPSHOT_FIELD
    // Up when no Redis node is marked down, down when all are, degraded in between; off
    // without [shared-cache].
    SharedTierState shared_state = SharedTierState::Off;
    LatencySnapshot shared_latency;  // shared-tier lookups that got a reply
    cache::CacheCounters cache;
    double hit_ratio = 0;
    uint64_t uptime_s = 0;
    LatencySnapshot latency[kAnswerSources];  // indexed by AnswerSource
    std::vector<UpstreamGroupStats> upstream_groups;
};

// A group as the stats read it: its name and its servers. The pointer keeps the set alive
// while it is read, should a reload replace it meanwhile.
struct UpstreamGroupSource {
    std::string name;
    std::shared_ptr<const upstream::UpstreamSet> servers;
};

// What the stats need to read; all of it is safe to read from any thread.
struct StatsSources {
    std::span<const WorkerCounters> workers;
    const cache::Cache* cache = nullptr;
    // The groups in force now, asked at every read (forwarding rules and reloads change them).
    std::function<std::vector<UpstreamGroupSource>()> upstream_groups;
    uint64_t started_ms = 0;
    const sharedcache::TierHealth* shared_tier = nullptr;
};

// A source for a daemon with one fixed set: the default group "." over `set`, which must
// outlive every read.
std::function<std::vector<UpstreamGroupSource>()> single_upstream_group(
    const upstream::UpstreamSet& set);

StatsSnapshot collect_stats(const StatsSources& sources, uint64_t now_ms);
// One group's counters and its servers' health, read now.
UpstreamGroupStats collect_group(const std::string& name, const upstream::UpstreamSet& set);

std::string format_text(const StatsSnapshot& s);
std::string format_json(const StatsSnapshot& s);
// The Prometheus text exposition format (version 0.0.4): control/prometheus.cpp.
std::string format_prometheus(const StatsSnapshot& s);

}  // namespace nscache::control
