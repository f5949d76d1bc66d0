// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/resource_limits.h"

#include <gtest/gtest.h>

namespace nscache::daemon {
namespace {

Config config_with(uint32_t max_upstream_queries) {
    Config c;
    c.listen = {*parse_socket_address("127.0.0.1:53", std::nullopt)};
    c.upstreams = {*parse_socket_address("192.0.2.53:53", std::nullopt)};
    c.max_upstream_queries = max_upstream_queries;
    return c;
}

TEST(ResourceLimits, ConfiguredUpstreamQueriesWhenTheyFit) {
    EXPECT_EQ(fit_upstream_queries(1'048'576, config_with(4096), 4), 4096u);
    EXPECT_EQ(fit_upstream_queries(1'048'576, config_with(1), 4), 1u);  // small stays small
}

TEST(ResourceLimits, LoweredToFitTheDescriptorLimit) {
    const Config c = config_with(4096);
    const uint32_t fits = fit_upstream_queries(65'536, c, 16);
    EXPECT_LT(fits, 4096u);
    // What the workers' queries may open, plus the TCP clients, stays under the limit.
    EXPECT_LE(uint64_t{fits} * 16 * kDescriptorsPerUpstreamQuery + c.max_tcp_connections, 65'536u);
}

TEST(ResourceLimits, NeverBelowAHandful) {
    EXPECT_EQ(fit_upstream_queries(100, config_with(4096), 8), 16u);
}

// The NSS and nscd sockets (anyone may connect, up to their caps) and the shared tier's Redis
// connections (one per resolver thread and node) come out of the same descriptors.
TEST(ResourceLimits, LocalSocketsAndRedisConnectionsAreReserved) {
    Config c = config_with(100'000);
    const uint32_t bare = fit_upstream_queries(65'536, c, 4);
    c.nss = true;
    c.nscd_socket = "/var/run/nscd/socket";
    const uint32_t fronts = fit_upstream_queries(65'536, c, 4);
    // Both sockets on the one host front: one more resolver, and the clients of both.
    EXPECT_LE(uint64_t{fronts} * 5 * kDescriptorsPerUpstreamQuery + 2 * 1024, 65'536u);
    EXPECT_LT(fronts, bare);
    c.shared_cache.redis_cluster = {*parse_socket_address("127.0.0.1:7000", std::nullopt),
                                    *parse_socket_address("127.0.0.1:7001", std::nullopt)};
    EXPECT_LT(fit_upstream_queries(65'536, c, 4), fronts);
}

// Review finding 2: the host front's one resolver holds a share of upstream queries for each
// protocol it serves (NSS, nscd), so that neither can take the other's; the budget counts
// each share, as it did when each protocol had a thread and a resolver of its own.
TEST(ResourceLimits, TheHostFrontHoldsAShareOfQueriesForEachProtocol) {
    Config c = config_with(100'000);
    c.nss = true;
    c.nscd_socket = "/var/run/nscd/socket";
    const uint64_t limit = 65'536;
    const uint32_t both = fit_upstream_queries(limit, c, 4);
    EXPECT_LE(
        uint64_t{both} * (4 + 2) * kDescriptorsPerUpstreamQuery + 2 * 1024 + c.max_tcp_connections,
        limit);
    c.nscd_socket.clear();
    const uint32_t nss_only = fit_upstream_queries(limit, c, 4);
    EXPECT_LE(
        uint64_t{nss_only} * (4 + 1) * kDescriptorsPerUpstreamQuery + 1024 + c.max_tcp_connections,
        limit);
    EXPECT_GT(nss_only, both);
}

}  // namespace
}  // namespace nscache::daemon
