// SPDX-License-Identifier: BSD-3-Clause
// The one builder from a Config to everything the daemon's threads take from it: the
// workers' Settings (which the fronts take as their ForwardingSettings), the routing in it,
// the hosts file's entries that routing answers, and what the control thread may change live
// (metrics address and allow list, state folder, TTL rules). Start-up (daemon.cpp) and every
// reload (supervisor.cpp) call the same functions, so a Config gives the same snapshot
// whichever way it comes. Main thread.
#pragma once

#include <cstdint>
#include <vector>

#include "cache/cache.h"
#include "cache/domain_ttl_caps.h"
#include "cache/name_set.h"
#include "common/log.h"
#include "config/config.h"
#include "control/control_server.h"
#include "server/settings.h"
#include "upstream/routing.h"
#include "upstream/upstream_set.h"

namespace nscache::daemon {

struct Snapshot {
    server::SettingsPtr settings;             // routing and ResolverOptions included
    std::vector<upstream::HostsEntry> hosts;  // the hosts file's entries, as read for it
    control::ControlLiveOptions control;
};

// The hosts file's entries the routing answers over DNS (none without `hosts-file`).
std::vector<upstream::HostsEntry> read_hosts(const Config& config);

// Upstream queries per worker that fit the descriptor limit (raised to its maximum first).
// `warn`: say so in the log when max-upstream-queries is lowered (at start).
uint32_t upstream_queries_within_limits(const Config& config, bool warn);

// `registry`: the upstreams known so far (an unchanged one keeps its health and counters).
// `max_upstream_queries`: from upstream_queries_within_limits.
// `previous`: the settings being replaced (null at start): an unchanged rate limit keeps its
// buckets. `tls`: the listeners' certificates as read for `config` (null: previous's).
Snapshot build_snapshot(const Config& config, std::vector<upstream::HostsEntry> hosts,
                        upstream::UpstreamRegistry& registry, uint32_t max_upstream_queries,
                        const server::Settings* previous, const server::TlsContexts* tls = nullptr);

// The log threshold a config names.
LogLevel log_level_of(LogThreshold threshold);

// Warnings about settings that work but hurt: a cache budget above the cgroup's memory bound,
// an `allow` beyond loopback without a rate limit. At start and at every reload.
void warn_about_settings(const server::Settings& settings);

// What the routing answers itself (local names, the zones kept local, CHAOS identities): a
// cache file's entries for them are left out at start, as the cache must not answer for them.
cache::NameSet local_answer_names(const upstream::Routing& routing);

// The [[forward]] rules' own TTL caps by domain (every rule's domains, so that the longest
// wins as in the routing; "." for the default rule), for entries loaded at start.
cache::DomainTtlCaps rule_ttl_caps(const upstream::Routing& routing);

// Removes the cache's entries that local_answer_names covers, in one pass over the cache
// (none when it is empty), at every reload; returns how many went. A pass over the whole
// cache: from the supervisor's thread, never from one that answers queries.
size_t flush_local_answers(cache::Cache& cache, const upstream::Routing& routing);

}  // namespace nscache::daemon
