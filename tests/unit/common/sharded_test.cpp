// SPDX-License-Identifier: BSD-3-Clause
#include "common/sharded.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace nscache {
namespace {

struct Counter {
    explicit Counter(int start) : value(start) {}
    int value;
};

TEST(Sharded, EachHashReachesOneShardAndTheSameOneEveryTime) {
    Sharded<int, 4> shards;
    shards.with(1, [](int& v) { v += 10; });
    shards.with(5, [](int& v) { v += 1; });  // 5 & 3 == 1: the same shard
    EXPECT_EQ(shards.with(1, [](int& v) { return v; }), 11);
    EXPECT_EQ(shards.with(2, [](int& v) { return v; }), 0);
    int total = 0;
    shards.for_each([&](int& v) { total += v; });
    EXPECT_EQ(total, 11);
}

TEST(Sharded, BuildsEveryShardFromTheSameArguments) {
    Sharded<Counter, 2> shards(7);
    int total = 0;
    shards.for_each([&](Counter& c) { total += c.value; });
    EXPECT_EQ(total, 14);
}

TEST(Sharded, TryWithReportsABusyShardInsteadOfWaiting) {
    Sharded<int, 2> shards;
    bool inner_ran = true;
    shards.with(0, [&](int&) {
        // The same shard is held (by this thread): try_with must not wait on it.
        inner_ran = shards.try_with(0, [](int& v) { ++v; });
        EXPECT_TRUE(shards.try_with(1, [](int& v) { ++v; }));  // another shard is free
    });
    EXPECT_FALSE(inner_ran);
    EXPECT_EQ(shards.with(0, [](int& v) { return v; }), 0);
    EXPECT_EQ(shards.with(1, [](int& v) { return v; }), 1);
}

TEST(Sharded, ShardsSitOnTheirOwnCacheLines) {
    Sharded<int, 4> shards;
    std::vector<const int*> addresses;
    shards.for_each([&](int& v) { addresses.push_back(&v); });
    for (size_t i = 1; i < addresses.size(); ++i) {
        const auto gap = reinterpret_cast<uintptr_t>(addresses[i]) -
                         reinterpret_cast<uintptr_t>(addresses[i - 1]);
        EXPECT_GE(gap, 64u);
    }
}

TEST(Sharded, ConcurrentUpdatesAreNotLost) {
    Sharded<int, 2> shards;
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
        threads.emplace_back([&, t] {
            for (int i = 0; i < 10000; ++i)
                shards.with(static_cast<uint64_t>(t + i), [](int& v) { ++v; });
        });
    }
    for (auto& th : threads) th.join();
    int total = 0;
    shards.for_each([&](int& v) { total += v; });
    EXPECT_EQ(total, 40000);
}

}  // namespace
}  // namespace nscache
