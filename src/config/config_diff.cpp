// SPDX-License-Identifier: BSD-3-Clause
// Which options differ between two configurations, by their names in the file: what a reload
// reports as applied.
#include <functional>

#include "config/config.h"

namespace nscache {
namespace {

template <typename T>
bool same(const T& a, const T& b) {
    return a == b;
}

bool same(const std::vector<Cidr>& a, const std::vector<Cidr>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].to_string() != b[i].to_string()) return false;
    }
    return true;
}

bool same(const std::vector<ForwardZone>& a, const std::vector<ForwardZone>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].domains != b[i].domains || !same(a[i].upstreams, b[i].upstreams) ||
            a[i].cache != b[i].cache || a[i].transport != b[i].transport ||
            a[i].max_ttl != b[i].max_ttl || a[i].negative_max_ttl != b[i].negative_max_ttl) {
            return false;
        }
    }
    return true;
}

bool same(const std::vector<LocalRecord>& a, const std::vector<LocalRecord>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (a[i].name != b[i].name || a[i].type != b[i].type || a[i].value != b[i].value) {
            return false;
        }
    }
    return true;
}

bool same(const std::vector<SpkiPin>& a, const std::vector<SpkiPin>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!(a[i].address == b[i].address) || a[i].sha256 != b[i].sha256) return false;
    }
    return true;
}

}  // namespace

std::vector<std::string> changed_options(const Config& a, const Config& b) {
    std::vector<std::string> changed;
#define NSCACHE_COMPARE(name, field) \
    if (!same(a.field, b.field)) changed.push_back(name)
    NSCACHE_COMPARE("upstream", upstreams);
    NSCACHE_COMPARE("forward", forwards);
    NSCACHE_COMPARE("resolv-file", resolv_file);
    NSCACHE_COMPARE("flush-on-upstream-change", flush_on_upstream_change);
    NSCACHE_COMPARE("forward-private-zones", forward_private_zones);
    NSCACHE_COMPARE("chaos-version", chaos_version);
    NSCACHE_COMPARE("chaos-id", chaos_id);
    NSCACHE_COMPARE("local-records", local_records);
    NSCACHE_COMPARE("local-ttl", local_ttl_s);
    NSCACHE_COMPARE("hosts-file", hosts_file);
    NSCACHE_COMPARE("log-level", log_level);
    NSCACHE_COMPARE("cache-size", cache_size);
    NSCACHE_COMPARE("allow", allow);
    NSCACHE_COMPARE("allow-snoop", allow_snoop);
    NSCACHE_COMPARE("min-ttl", min_ttl);
    NSCACHE_COMPARE("max-ttl", max_ttl);
    NSCACHE_COMPARE("negative-max-ttl", negative_max_ttl);
    NSCACHE_COMPARE("servfail-ttl", servfail_ttl);
    NSCACHE_COMPARE("failure-ttl", failure_ttl_ms);
    NSCACHE_COMPARE("failure-ttl-max", failure_ttl_max_ms);
    NSCACHE_COMPARE("query-timeout", query_timeout_ms);
    NSCACHE_COMPARE("max-tcp-connections", max_tcp_connections);
    NSCACHE_COMPARE("max-tcp-per-client", max_tcp_per_client);
    NSCACHE_COMPARE("tcp-idle-timeout", tcp_idle_timeout_ms);
    NSCACHE_COMPARE("tcp-read-timeout", tcp_read_timeout_ms);
    NSCACHE_COMPARE("max-upstream-queries", max_upstream_queries);
    NSCACHE_COMPARE("metrics-listen", metrics_listen);
    NSCACHE_COMPARE("metrics-allow", metrics_allow);
    NSCACHE_COMPARE("health-listen", health_listen);
    NSCACHE_COMPARE("stale-answer-timeout", stale_answer_timeout_ms);
    NSCACHE_COMPARE("serve-expired", serve_expired);
    NSCACHE_COMPARE("prefetch", prefetch);
    NSCACHE_COMPARE("rate-limit", rate_limit);
    NSCACHE_COMPARE("rate-limit-burst", rate_limit_burst);
    NSCACHE_COMPARE("rate-limit-action", rate_limit_action);
    NSCACHE_COMPARE("tls-pin", tls_pins);
    NSCACHE_COMPARE("tls-certificate", tls_certificate);
    NSCACHE_COMPARE("tls-private-key", tls_private_key);
    NSCACHE_COMPARE("https-path", https_path);
#undef NSCACHE_COMPARE
    return changed;
}

}  // namespace nscache
