// SPDX-License-Identifier: BSD-3-Clause
// ResolverOptions: what a reload may change in how a Resolver forwards (timeouts, caps, TTL
// rules, pools, cookies). Plain values, built by the daemon from a Config; each Resolver holds
// its own copy and swaps it on its thread. Kept apart from resolver.h so that the settings
// snapshots and the fronts need not pull in the whole Resolver.
#pragma once

#include <cstdint>
#include <string>

#include "cache/answer.h"
#include "config/config.h"
#include "upstream/failure_cache.h"
#include "upstream/udp_socket_pool.h"

namespace nscache::upstream {

struct ResolverOptions {
    uint32_t query_timeout_ms = 2000;
    // Upstream queries one worker keeps in flight at most; past this, misses get SERVFAIL at
    // once (config max-upstream-queries, lowered at start to fit the descriptor limit).
    uint32_t max_outstanding = 4096;
    FailurePolicy failures;
    uint16_t edns_buffer_size = 1232;
    cache::TtlPolicy ttl;
    uint32_t local_ttl_s = 300;  // local names, localhost, NXDOMAIN zones kept local
    std::string chaos_version;   // empty: CHAOS queries are REFUSED
    std::string chaos_id;
    UdpPoolOptions udp_pool;
    uint64_t stream_idle_timeout_ms = 10'000;  // upstream TCP and TLS connections
    TlsAuth tls_auth = TlsAuth::Strict;
    bool upstream_cookies = true;  // DNS cookies (RFC 7873) on UDP queries
    // The second-level cache in Redis ([shared-cache]); off unless it names a server. Read
    // from the options at start (ResolverShared's) only: a reload keeps it.
    SharedCacheConfig shared_cache;
};

}  // namespace nscache::upstream
