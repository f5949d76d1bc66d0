// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/resource_limits.h"

#include <sys/resource.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "nscd/nscd_server.h"
#include "nssd/nss_server.h"
#include "sharedcache/tier_health.h"

namespace nscache::daemon {
namespace {

// Descriptors the daemon holds besides upstream queries and TCP clients: stdio, epoll and
// eventfd per thread, the control and metrics sockets and their clients, lock files.
constexpr uint64_t kFixedDescriptors = 128;
constexpr uint32_t kMinUpstreamQueries = 16;

}  // namespace

uint32_t fit_upstream_queries(uint64_t descriptor_limit, const Config& config, unsigned workers) {
    const uint64_t w = std::max(workers, 1u);
    // Threads with a Resolver of their own: the workers and the host front (one thread for
    // both the NSS and the nscd socket).
    const uint64_t protocols = (config.nss ? 1 : 0) + (config.nscd_socket.empty() ? 0 : 1);
    const uint64_t resolvers = w + (protocols > 0 ? 1 : 0);
    // Shares of upstream queries: one per worker, and one per protocol of the host front,
    // whose resolver holds a share for each (so that neither starves the other).
    const uint64_t query_shares = w + protocols;
    uint64_t servers = config.upstreams.size();
    for (const ForwardZone& zone : config.forwards) servers += zone.upstreams.size();
    // Redis connections: one per resolver and node. A cluster's nodes are learnt from
    // CLUSTER SLOTS (replicas too): twice those configured and a few more, up to the cap.
    const SharedCacheConfig& tier = config.shared_cache;
    const uint64_t redis_nodes = !tier.enabled() ? 0
                                 : tier.redis
                                     ? 1
                                     : std::min<uint64_t>(sharedcache::TierHealth::kMaxNodes,
                                                          2 * tier.redis_cluster.size() + 6);
    const uint64_t reserved =
        kFixedDescriptors + uint64_t{config.listen.size()} * 2 * w +
        uint64_t{config.listen_tls.size() + config.listen_https.size()} * w +
        config.max_tcp_connections + (config.nss ? nssd::NssServer::kMaxConnections : 0) +
        (config.nscd_socket.empty() ? 0 : nscd::NscdServer::kMaxConnections) + servers +
        redis_nodes * resolvers + 2 * w +  // probes, spare descriptors
        // each resolver's idle upstream sockets, IPv4 and IPv6, and its
        // upstream TCP/TLS connections (one of each per server)
        (2 * uint64_t{config.upstream_sockets} + 2 * servers) * resolvers;
    const uint64_t left = descriptor_limit > reserved ? descriptor_limit - reserved : 0;
    const uint64_t fits = left / query_shares / kDescriptorsPerUpstreamQuery;
    // Never more than configured; never fewer than a handful, even on a tiny limit.
    return static_cast<uint32_t>(std::min<uint64_t>(config.max_upstream_queries,
                                                    std::max<uint64_t>(fits, kMinUpstreamQueries)));
}

uint64_t raise_descriptor_limit() {
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlimit raised = rl;
        raised.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &raised) == 0) rl = raised;
    }
    return rl.rlim_cur;
}

std::optional<uint64_t> cgroup_memory_max() {
    std::ifstream self("/proc/self/cgroup");
    std::string line;
    while (std::getline(self, line)) {
        if (line.rfind("0::", 0) != 0) continue;  // the cgroup v2 line
        std::ifstream max("/sys/fs/cgroup" + line.substr(3) + "/memory.max");
        std::string value;
        if (!(max >> value) || value == "max") return std::nullopt;
        try {
            return std::stoull(value);
        } catch (...) {
            return std::nullopt;
        }
    }
    return std::nullopt;
}

}  // namespace nscache::daemon
