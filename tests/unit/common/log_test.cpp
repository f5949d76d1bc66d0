// SPDX-License-Identifier: BSD-3-Clause
#include "common/log.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

TEST(LogLimiter, OneLineASecondWithTheCountHeldBack) {
    LogLimiter limiter;
    uint64_t held_back = 99;
    ASSERT_TRUE(limiter.allow(10'000, held_back));
    EXPECT_EQ(held_back, 0u);
    EXPECT_FALSE(limiter.allow(10'000, held_back));
    EXPECT_FALSE(limiter.allow(10'500, held_back));
    EXPECT_FALSE(limiter.allow(10'999, held_back));
    ASSERT_TRUE(limiter.allow(11'000, held_back));
    EXPECT_EQ(held_back, 3u);
    ASSERT_TRUE(limiter.allow(20'000, held_back));
    EXPECT_EQ(held_back, 0u);
}

}  // namespace
}  // namespace nscache
