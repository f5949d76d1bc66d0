// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/failure_cache.h"

#include <gtest/gtest.h>

namespace nscache::upstream {
namespace {

// Question::key_hash() values.
constexpr uint64_t kQ = 0x1234'5678'9abc'def0;
constexpr uint64_t kOther = 0x0fed'cba9'8765'4321;

TEST(FailureCache, HeldForTheInitialTimeThenAskedAgain) {
    FailureCache f(FailurePolicy{.initial_ms = 1000, .max_ms = 8000});
    EXPECT_FALSE(f.failing(kQ, 0, nullptr));
    EXPECT_EQ(f.record(kQ, FailureReason::NetworkError, 10'000), 1000u);
    FailureReason why{};
    EXPECT_TRUE(f.failing(kQ, 10'999, &why));
    EXPECT_EQ(why, FailureReason::NetworkError);
    EXPECT_FALSE(f.failing(kQ, 11'000, nullptr));
    EXPECT_FALSE(f.failing(kOther, 10'500, nullptr));
}

TEST(FailureCache, RepeatedFailuresBackOffUpToTheMax) {
    FailureCache f(FailurePolicy{.initial_ms = 1000, .max_ms = 4000});
    uint64_t now = 0;
    std::vector<uint32_t> holds;
    for (int i = 0; i < 5; ++i) {
        const uint32_t hold = f.record(kQ, FailureReason::NoReachableAuthority, now);
        holds.push_back(hold);
        now += hold + 100;  // asked again soon after the hold ended, and failed again
    }
    EXPECT_EQ(holds, (std::vector<uint32_t>{1000, 2000, 4000, 4000, 4000}));
}

TEST(FailureCache, AnAnswerOrALongPauseStartsAfresh) {
    FailureCache f(FailurePolicy{.initial_ms = 1000, .max_ms = 60'000});
    f.record(kQ, FailureReason::NoReachableAuthority, 0);
    EXPECT_EQ(f.record(kQ, FailureReason::NoReachableAuthority, 1100), 2000u);
    f.clear(kQ);
    EXPECT_EQ(f.record(kQ, FailureReason::NoReachableAuthority, 3200), 1000u);
    EXPECT_EQ(f.record(kQ, FailureReason::NoReachableAuthority, 100'000), 1000u);  // long after
    f.clear_all();
    EXPECT_FALSE(f.failing(kQ, 100'001, nullptr));
}

}  // namespace
}  // namespace nscache::upstream
