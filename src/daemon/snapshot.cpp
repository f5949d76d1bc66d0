// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/snapshot.h"

#include <utility>

#include "daemon/resource_limits.h"
#include "dns/name.h"
#include "dns/wire.h"
#include "hostdb/hosts_file.h"

namespace nscache::daemon {

std::vector<upstream::HostsEntry> read_hosts(const Config& config) {
    if (config.hosts_file.empty()) return {};
    return hostdb::read_hosts_entries(config.hosts_file);
}

uint32_t upstream_queries_within_limits(const Config& config, bool warn) {
    const uint64_t limit = raise_descriptor_limit();
    const uint32_t fits = fit_upstream_queries(limit, config, config.threads);
    if (warn && fits < config.max_upstream_queries) {
        log_warning(
            "descriptor limit %llu: max-upstream-queries lowered from %u to %u per worker "
            "(raise LimitNOFILE or ulimit -n)",
            static_cast<unsigned long long>(limit), config.max_upstream_queries, fits);
    }
    return fits;
}

Snapshot build_snapshot(const Config& config, std::vector<upstream::HostsEntry> hosts,
                        upstream::UpstreamRegistry& registry, uint32_t max_upstream_queries,
                        const server::Settings* previous, const server::TlsContexts* tls) {
    Snapshot s;
    s.settings = server::make_settings(config, upstream::Routing::build(config, registry, hosts),
                                       max_upstream_queries, previous, tls);
    s.hosts = std::move(hosts);
    if (!config.metrics_listen.empty()) {
        s.control.metrics_listen = parse_socket_address(config.metrics_listen, std::nullopt);
    }
    s.control.metrics_allow = config.metrics_allow;
    if (!config.health_listen.empty()) {
        s.control.health_listen = parse_socket_address(config.health_listen, std::nullopt);
    }
    s.control.state_dir = config.state_dir;
    s.control.ttl_policy = s.settings->resolver.ttl;
    s.control.ttl_caps =
        std::make_shared<const cache::DomainTtlCaps>(rule_ttl_caps(*s.settings->routing));
    return s;
}

LogLevel log_level_of(LogThreshold t) {
    switch (t) {
        case LogThreshold::Error:
            return LogLevel::Error;
        case LogThreshold::Warning:
            return LogLevel::Warning;
        case LogThreshold::Info:
            return LogLevel::Info;
        case LogThreshold::Debug:
            return LogLevel::Debug;
    }
    return LogLevel::Info;
}

void warn_about_settings(const server::Settings& settings) {
    const Config& config = settings.config;
    // The cache's budget plus what the daemon needs besides it (measured: ~12 MiB, and
    // buffers per worker); a cgroup bound below that ends in an OOM kill under load.
    const uint64_t needed = config.cache_size + (uint64_t{32} << 20) + config.threads * (4u << 20);
    if (auto max = cgroup_memory_max(); max && *max < needed) {
        log_warning(
            "cache-size %zu needs about %llu bytes, more than this cgroup's memory.max "
            "%llu: lower cache-size or raise MemoryMax",
            config.cache_size, static_cast<unsigned long long>(needed),
            static_cast<unsigned long long>(*max));
    }
    if (!settings.rate_limiter && settings.access.reaches_beyond_loopback()) {
        log_warning(
            "allow reaches beyond loopback and rate-limit is not set: replies to other "
            "hosts are unlimited (a reflection risk); set rate-limit");
    }
}

cache::NameSet local_answer_names(const upstream::Routing& routing) {
    auto bytes = [](const std::string& wire) {
        return dns::Bytes(reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
    };
    cache::NameSet names;
    for (const std::string& name : routing.local_names()) names.add_name(bytes(name));
    for (const std::string& zone : routing.local_zones()) names.add_subtree(bytes(zone));
    // A [[forward]] domain under a local zone (cluster.local under local) is not local.
    for (const std::string& domain : routing.forward_domains()) names.add_exception(bytes(domain));
    for (const char* chaos : {"version.bind.", "version.server.", "id.server.", "hostname.bind."}) {
        const dns::NameBuffer name = *dns::name_from_text(chaos);
        names.add_name(name.view());
    }
    return names;
}

static_assert(kNoTtlCap == cache::DomainTtlCaps::kNoCap, "a rule without a cap caps nothing");

cache::DomainTtlCaps rule_ttl_caps(const upstream::Routing& routing) {
    cache::DomainTtlCaps caps;
    for (const upstream::ForwardRule& rule : routing.rules()) {
        const cache::DomainTtlCaps::Caps own{rule.max_ttl, rule.negative_max_ttl};
        for (const std::string& domain : rule.domains) {
            const auto name = dns::name_from_text(domain);
            if (!name) continue;
            dns::NameBuffer lower;
            dns::lower_name(name->view(), lower);
            caps.add(lower.view(), own);
        }
    }
    return caps;
}

size_t flush_local_answers(cache::Cache& cache, const upstream::Routing& routing) {
    // One pass for all of them: a pass per local zone (about 100: RFC 6303's) cost 594M
    // instructions at start with an empty cache, and 100 passes over a full one.
    return cache.flush_matching(local_answer_names(routing));
}

}  // namespace nscache::daemon
