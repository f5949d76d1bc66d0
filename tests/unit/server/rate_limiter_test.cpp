// SPDX-License-Identifier: BSD-3-Clause
#include "server/rate_limiter.h"

#include <gtest/gtest.h>

#include "config/address.h"

namespace nscache::server {
namespace {

TEST(RateLimiter, AllowsBurstThenRefillsAtRate) {
    RateLimiter limiter(10, 5);
    const auto client = *parse_socket_address("192.0.2.7:1000", std::nullopt);
    int allowed = 0;
    for (int i = 0; i < 20; ++i) allowed += limiter.allow(client.sa(), 1000);
    EXPECT_EQ(allowed, 5);
    EXPECT_FALSE(limiter.allow(client.sa(), 1050));  // half a token
    EXPECT_TRUE(limiter.allow(client.sa(), 1100));   // one token after 100 ms at 10/s
}

TEST(RateLimiter, SharesBucketWithinPrefixOnly) {
    RateLimiter limiter(1, 1);
    const auto a = *parse_socket_address("192.0.2.7:1", std::nullopt);
    const auto same_24 = *parse_socket_address("192.0.2.200:1", std::nullopt);
    const auto other = *parse_socket_address("198.51.100.1:1", std::nullopt);
    EXPECT_TRUE(limiter.allow(a.sa(), 0));
    EXPECT_FALSE(limiter.allow(same_24.sa(), 0));
    EXPECT_TRUE(limiter.allow(other.sa(), 0));
    const auto v6 = *parse_socket_address("[2001:db8:0:100::1]:1", std::nullopt);
    const auto v6_same_56 = *parse_socket_address("[2001:db8:0:1ff::9]:1", std::nullopt);
    EXPECT_TRUE(limiter.allow(v6.sa(), 0));
    EXPECT_FALSE(limiter.allow(v6_same_56.sa(), 0));
}

// A burst above 4,294,967 used to wrap the 32-bit milli-token count to a small number.
TEST(RateLimiter, LargeBurstDoesNotWrap) {
    RateLimiter limiter(10'000'000, 5'000'000);
    const auto client = *parse_socket_address("192.0.2.7:1000", std::nullopt);
    int allowed = 0;
    for (int i = 0; i < 100'000; ++i) allowed += limiter.allow(client.sa(), 1000);
    EXPECT_EQ(allowed, 100'000);
}

}  // namespace
}  // namespace nscache::server
