// What every worker of the server shares: settings, the cache, the forwarding state and the
// access list. Built once at start; the workers only read it (the cache and the resolver state
// do their own locking).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include "cache/cache.h"
#include "config/config.h"
#include "server/access_list.h"
#include "server/rate_limiter.h"
#include "server/tcp_shared.h"
#include "upstream/resolver.h"

namespace nscache::server {

struct ServerShared {
    const Config& config;
    cache::Cache& cache;
    upstream::ResolverShared& resolver;
    AccessList access;
    std::unique_ptr<RateLimiter> rate_limiter;  // null: no rate limit
    TcpShared tcp;
};

}  // namespace nscache::server
