// SPDX-License-Identifier: BSD-3-Clause
#include "server/client_counts.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "config/address.h"

namespace nscache::server {
namespace {

SocketAddress address(const std::string& text) {
    return *parse_socket_address(text, std::nullopt);
}

TEST(ClientCounts, AcquiresUpToTheLimitAndReleasesBackToZero) {
    ClientCounts counts;
    const auto a = address("192.0.2.7:1000");
    EXPECT_TRUE(counts.acquire(a.sa(), 2));
    EXPECT_TRUE(counts.acquire(a.sa(), 2));
    EXPECT_FALSE(counts.acquire(a.sa(), 2));
    EXPECT_EQ(counts.count(a.sa()), 2u);
    counts.release(a.sa());
    EXPECT_EQ(counts.count(a.sa()), 1u);
    EXPECT_TRUE(counts.acquire(a.sa(), 2));
    counts.release(a.sa());
    counts.release(a.sa());
    EXPECT_EQ(counts.count(a.sa()), 0u);
    counts.release(a.sa());  // more releases than acquires: nothing goes below zero
    EXPECT_EQ(counts.count(a.sa()), 0u);
}

TEST(ClientCounts, ALimitOfZeroCountsNothing) {
    ClientCounts counts;
    const auto a = address("192.0.2.7:1");
    EXPECT_FALSE(counts.acquire(a.sa(), 0));
    EXPECT_EQ(counts.count(a.sa()), 0u);
}

// The port is not part of the client: one address's connections share one count.
TEST(ClientCounts, OneAddressWhateverThePortAndAnIpv4MappedPeerIsItsIpv4Address) {
    ClientCounts counts;
    EXPECT_TRUE(counts.acquire(address("192.0.2.7:1").sa(), 2));
    EXPECT_TRUE(counts.acquire(address("[::ffff:192.0.2.7]:2").sa(), 2));
    EXPECT_FALSE(counts.acquire(address("192.0.2.7:3").sa(), 2));
    EXPECT_EQ(counts.count(address("192.0.2.7:9").sa()), 2u);
}

TEST(ClientCounts, AddressesAreCountedApart) {
    ClientCounts counts;
    for (int i = 1; i <= 100; ++i) {
        const auto a = address("198.51.100." + std::to_string(i) + ":53");
        EXPECT_TRUE(counts.acquire(a.sa(), 1));
    }
    const auto v6 = address("[2001:db8::1]:53");
    EXPECT_TRUE(counts.acquire(v6.sa(), 1));
    EXPECT_FALSE(counts.acquire(v6.sa(), 1));
    EXPECT_EQ(counts.count(address("198.51.100.50:1").sa()), 1u);
    EXPECT_EQ(counts.count(address("[2001:db8::2]:53").sa()), 0u);
}

// Every worker thread counts its accepts and closes in the one table.
TEST(ClientCounts, ThreadsCountingTogetherEndAtZero) {
    ClientCounts counts;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&counts] {
            for (int round = 0; round < 2000; ++round) {
                const auto a = address("203.0.113." + std::to_string(round % 20) + ":1");
                if (counts.acquire(a.sa(), 1000)) counts.release(a.sa());
            }
        });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < 20; ++i) {
        EXPECT_EQ(counts.count(address("203.0.113." + std::to_string(i) + ":1").sa()), 0u);
    }
}

}  // namespace
}  // namespace nscache::server
