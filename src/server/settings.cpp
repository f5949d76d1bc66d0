// SPDX-License-Identifier: BSD-3-Clause
#include "server/settings.h"

namespace nscache::server {

SettingsPtr make_settings(const Config& c, std::shared_ptr<const upstream::Routing> routing,
                          uint32_t max_upstream_queries, const Settings* previous,
                          const TlsContexts* tls) {
    auto s = std::make_shared<Settings>();
    s->config = c;
    s->access = AccessList(c.allow);
    s->snoop = AccessList(c.allow_snoop);
    if (c.rate_limit > 0) {
        const bool same = previous != nullptr && previous->rate_limiter &&
                          previous->config.rate_limit == c.rate_limit &&
                          previous->config.rate_limit_burst == c.rate_limit_burst;
        s->rate_limiter = same ? previous->rate_limiter
                               : std::make_shared<RateLimiter>(c.rate_limit, c.rate_limit_burst);
    }
    s->routing = std::move(routing);
    s->cache_policy = {c.prefetch, c.serve_expired, c.stale_answer_timeout_ms};
    upstream::ResolverOptions& o = s->resolver;
    o.query_timeout_ms = c.query_timeout_ms;
    o.max_outstanding = max_upstream_queries;
    o.failures = upstream::FailurePolicy{c.failure_ttl_ms, c.failure_ttl_max_ms};
    o.edns_buffer_size = c.edns_buffer_size;
    o.ttl = cache::TtlPolicy{c.min_ttl, c.max_ttl, c.negative_max_ttl, c.servfail_ttl};
    o.local_ttl_s = c.local_ttl_s;
    o.chaos_version = c.chaos_version;
    o.chaos_id = c.chaos_id;
    o.udp_pool.idle_sockets = c.upstream_sockets;
    o.udp_pool.max_uses = c.upstream_socket_uses;
    o.stream_idle_timeout_ms = c.upstream_idle_timeout_ms;
    o.tls_auth = c.tls_auth;
    o.upstream_cookies = c.upstream_cookies;
    o.shared_cache = c.shared_cache;
    s->tcp = TcpLimits{.idle_timeout_ms = c.tcp_idle_timeout_ms,
                       .read_timeout_ms = c.tcp_read_timeout_ms,
                       .max_connections = c.max_tcp_connections,
                       .max_per_client = c.max_tcp_per_client};
    if (tls != nullptr) {
        s->tls = *tls;
    } else if (previous != nullptr) {
        s->tls = previous->tls;
    }
    return s;
}

}  // namespace nscache::server
