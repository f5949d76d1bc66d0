// SPDX-License-Identifier: BSD-3-Clause
// Settings: everything a reload may change, as one immutable snapshot built from a Config.
// The main thread builds a new one on SIGHUP, `nscache reload` or a changed resolv.conf and
// posts it to every worker (and the NSS thread); each swaps its pointer on its own thread,
// between two events, so a query is handled start to finish under one set of settings and no
// lock or atomic is read per query. What cannot change without a restart (listen addresses,
// threads, user, socket paths, the UDP buffer size) is read from the Config at start only.
#pragma once

#include <memory>

#include "config/config.h"
#include "server/access_list.h"
#include "server/rate_limiter.h"
#include "server/tcp_shared.h"
#include "upstream/resolver.h"
#include "upstream/routing.h"

namespace nscache::server {

struct Settings {
    Config config;
    AccessList access{{}};
    AccessList snoop{{}};                       // who may ask without RD (allow-snoop)
    std::shared_ptr<RateLimiter> rate_limiter;  // null: no rate limit
    std::shared_ptr<const upstream::Routing> routing;
    upstream::ResolverOptions resolver;
    TcpLimits tcp;
};

using SettingsPtr = std::shared_ptr<const Settings>;

// `max_upstream_queries`: the per-worker cap after fitting it to the descriptor limit.
// `previous`: the settings being replaced, if any: an unchanged rate limit keeps its buckets.
SettingsPtr make_settings(const Config& config, std::shared_ptr<const upstream::Routing> routing,
                          uint32_t max_upstream_queries, const Settings* previous = nullptr);

}  // namespace nscache::server
