// SPDX-License-Identifier: BSD-3-Clause
// What every worker of the server shares: the start-up config, the cache, the forwarding
// state, TCP counts. Built once at start; the workers only read it (the cache and the
// resolver state do their own locking). What a reload changes is in Settings (settings.h).
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
    const Config& config;  // as at start: what a reload cannot change (buffer sizes, sockets)
    cache::Cache& cache;
    upstream::ResolverShared& resolver;
    TcpShared tcp;
};

}  // namespace nscache::server
