// SPDX-License-Identifier: BSD-3-Clause
#include "config/address.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

TEST(SocketAddress, ParsesIpv4AndIpv6WithAndWithoutPort) {
    EXPECT_EQ(parse_socket_address("127.0.0.1:53", std::nullopt)->to_string(), "127.0.0.1:53");
    EXPECT_EQ(parse_socket_address("[::1]:5353", std::nullopt)->to_string(), "[::1]:5353");
    EXPECT_EQ(parse_socket_address("192.0.2.1", 53)->to_string(), "192.0.2.1:53");
    EXPECT_EQ(parse_socket_address("2001:db8::1", 53)->to_string(), "[2001:db8::1]:53");
    EXPECT_EQ(parse_socket_address("[2001:db8::1]", 53)->to_string(), "[2001:db8::1]:53");
    EXPECT_FALSE(parse_socket_address("127.0.0.1", std::nullopt));
    EXPECT_FALSE(parse_socket_address("999.1.1.1:53", std::nullopt));
    EXPECT_FALSE(parse_socket_address("127.0.0.1:99999", std::nullopt));
    EXPECT_FALSE(parse_socket_address("[::1:53", std::nullopt));
    EXPECT_FALSE(parse_socket_address("localhost:53", std::nullopt));
    EXPECT_TRUE(parse_socket_address("127.0.0.2:53", std::nullopt)->is_loopback());
    EXPECT_FALSE(parse_socket_address("192.0.2.1:53", std::nullopt)->is_loopback());
}

TEST(Cidr, MatchesPrefixes) {
    auto net = parse_cidr("10.1.0.0/16");
    ASSERT_TRUE(net);
    EXPECT_TRUE(net->contains(parse_socket_address("10.1.200.3:1", std::nullopt)->sa()));
    EXPECT_FALSE(net->contains(parse_socket_address("10.2.0.1:1", std::nullopt)->sa()));
    EXPECT_FALSE(net->contains(parse_socket_address("[::1]:1", std::nullopt)->sa()));
    // An IPv4-mapped IPv6 client is matched as IPv4.
    EXPECT_TRUE(net->contains(parse_socket_address("[::ffff:10.1.0.9]:1", std::nullopt)->sa()));
    auto odd = parse_cidr("192.168.0.128/25");
    EXPECT_TRUE(odd->contains(parse_socket_address("192.168.0.200:1", std::nullopt)->sa()));
    EXPECT_FALSE(odd->contains(parse_socket_address("192.168.0.100:1", std::nullopt)->sa()));
    auto host = parse_cidr("::1");
    EXPECT_EQ(host->prefix, 128);
    EXPECT_FALSE(parse_cidr("10.0.0.0/33"));
    EXPECT_FALSE(parse_cidr("nonsense/8"));
}

}  // namespace
}  // namespace nscache
