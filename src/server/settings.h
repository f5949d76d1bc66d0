// SPDX-License-Identifier: BSD-3-Clause
// Settings: what a DNS worker reads of everything a reload may change, as one immutable
// snapshot built from a Config (the routing and ResolverOptions it shares with the host
// fronts, plus the server's own: access lists, rate limit, TCP limits). The daemon builds a
// new one on SIGHUP, `nscache reload` or a changed watched file (daemon/snapshot.h)
// and posts it to every worker; each swaps its pointer on its own thread, between two
// events, so a query is handled start to finish under one set of settings and no lock or
// atomic is read per query. What cannot change without a restart (listen addresses, threads,
// user, socket paths, the UDP buffer size) is read from the Config at start only.
#pragma once

#include <memory>

#include "config/config.h"
#include "server/access_list.h"
#include "server/rate_limiter.h"
#include "server/tcp_shared.h"
#include "server/tls_server.h"
#include "upstream/forwarding_settings.h"

namespace nscache::server {

// A ForwardingSettings too: the same snapshot goes to the fronts as that part only.
struct Settings : upstream::ForwardingSettings {
    Config config;
    AccessList access{{}};
    AccessList snoop{{}};                       // who may ask without RD (allow-snoop)
    std::shared_ptr<RateLimiter> rate_limiter;  // null: no rate limit
    TcpLimits tcp;
    // The DoT and DoH listeners' certificate, as read for these settings: a reload reads the
    // files again (a renewed certificate at the same path), new connections take it.
    TlsContexts tls;
};

using SettingsPtr = std::shared_ptr<const Settings>;

// `max_upstream_queries`: the per-worker cap after fitting it to the descriptor limit.
// `previous`: the settings being replaced, if any: an unchanged rate limit keeps its buckets.
// `tls`: the listeners' contexts read for `config` (load_tls_contexts); null: those of
// `previous` (a change that did not re-read the files: resolv.conf, the hosts file).
SettingsPtr make_settings(const Config& config, std::shared_ptr<const upstream::Routing> routing,
                          uint32_t max_upstream_queries, const Settings* previous = nullptr,
                          const TlsContexts* tls = nullptr);

}  // namespace nscache::server
