// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/inflight.h"

#include <gtest/gtest.h>

namespace nscache::upstream {
namespace {

TEST(InflightTable, FirstLeadsOthersJoinFinishHandsAllBack) {
    InflightTable table;
    Waiter a{0, 1}, b{1, 2}, c{0, 3};
    EXPECT_EQ(table.join("k", &a), JoinResult::Leader);
    EXPECT_EQ(table.join("k", &b), JoinResult::Joined);
    EXPECT_EQ(table.join("k", &c), JoinResult::Joined);
    EXPECT_EQ(table.join("other", nullptr), JoinResult::Leader);
    table.leave("k", c);
    auto waiters = table.finish("k");
    ASSERT_EQ(waiters.size(), 2u);
    EXPECT_EQ(waiters[0].cookie, 1u);
    EXPECT_EQ(waiters[1].cookie, 2u);
    EXPECT_TRUE(table.finish("k").empty());
    EXPECT_EQ(table.join("k", &a), JoinResult::Leader);  // finished: a new query leads again
}

TEST(InflightTable, BoundsWaitersPerQuery) {
    InflightTable table;
    Waiter w{0, 0};
    ASSERT_EQ(table.join("k", &w), JoinResult::Leader);
    for (size_t i = 1; i < InflightTable::kMaxWaitersPerQuery; ++i) {
        w.cookie = i;
        ASSERT_EQ(table.join("k", &w), JoinResult::Joined);
    }
    EXPECT_EQ(table.join("k", &w), JoinResult::Full);
}

}  // namespace
}  // namespace nscache::upstream
