#include "common/log.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

TEST(LogLimiterTest, OneLineASecondThenTheCountHeldBack) {
    LogLimiter limiter;
    uint64_t suppressed = 99;
    ASSERT_TRUE(limiter.allow(10'000, suppressed));
    EXPECT_EQ(suppressed, 0u);
    for (uint64_t t = 10'000; t < 11'000; t += 10) EXPECT_FALSE(limiter.allow(t, suppressed));
    ASSERT_TRUE(limiter.allow(11'000, suppressed));
    EXPECT_EQ(suppressed, 100u);
    EXPECT_FALSE(limiter.allow(11'500, suppressed));
    ASSERT_TRUE(limiter.allow(60'000, suppressed));
    EXPECT_EQ(suppressed, 1u);
}

TEST(LogLimiterTest, EachCallSiteHasItsOwnBudget) {
    // Two sites logging in the same instant both get their first line out; the macro's
    // limiter is a static of the call site (compile check that it expands in a loop body).
    LogLimiter a;
    LogLimiter b;
    uint64_t suppressed = 0;
    EXPECT_TRUE(a.allow(5'000, suppressed));
    EXPECT_TRUE(b.allow(5'000, suppressed));
    for (int i = 0; i < 3; ++i) NSCACHE_LOG_LIMITED(Debug, "probe %d", i);
}

}  // namespace
}  // namespace nscache
