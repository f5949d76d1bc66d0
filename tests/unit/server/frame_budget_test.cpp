// SPDX-License-Identifier: BSD-3-Clause
#include "server/frame_budget.h"

#include <gtest/gtest.h>

namespace nscache::server {
namespace {

TEST(FrameBudget, AllowsTheBurstThenTheRate) {
    FrameBudget budget(5, 10);  // 5 at once, then one per 100 ms
    const uint64_t start = 1'000;
    for (int i = 0; i < 5; ++i) EXPECT_TRUE(budget.take(start)) << i;
    EXPECT_FALSE(budget.take(start));
    EXPECT_FALSE(budget.take(start + 50));
    EXPECT_TRUE(budget.take(start + 100));
    EXPECT_FALSE(budget.take(start + 150));
    EXPECT_TRUE(budget.take(start + 220));
}

TEST(FrameBudget, RefillsNoHigherThanTheBurst) {
    FrameBudget budget(3, 10);
    EXPECT_TRUE(budget.take(10));
    int taken = 0;
    while (budget.take(1'000'000) && taken < 100) ++taken;
    EXPECT_EQ(taken, 3);
}

TEST(FrameBudget, KeepsFractionsOfATokenBetweenCalls) {
    FrameBudget budget(1, 1'000);  // one per millisecond
    EXPECT_TRUE(budget.take(0));
    EXPECT_FALSE(budget.take(0));
    EXPECT_TRUE(budget.take(1));
}

}  // namespace
}  // namespace nscache::server
