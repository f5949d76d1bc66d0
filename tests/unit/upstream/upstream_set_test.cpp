// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/upstream_set.h"

#include <gtest/gtest.h>

namespace nscache::upstream {
namespace {

UpstreamSet three() {
    return UpstreamSet(
        std::vector<SocketAddress>{*parse_socket_address("192.0.2.1:53", std::nullopt),
                                   *parse_socket_address("192.0.2.2:53", std::nullopt),
                                   *parse_socket_address("192.0.2.3:53", std::nullopt)});
}

TEST(UpstreamSet, PrefersFastestHealthyUntried) {
    auto set = three();
    set.record_answer(0, 5000, 0);
    set.record_answer(1, 1000, 0);
    set.record_answer(2, 3000, 0);
    EXPECT_EQ(set.choose(0, 0), 1);
    EXPECT_EQ(set.choose(0b010, 0), 2);
    EXPECT_EQ(set.choose(0b110, 0), 0);
    EXPECT_EQ(set.choose(0b111, 0), -1);
}

TEST(UpstreamSet, MarksDownAfterRepeatedTimeoutsAndBackOnAnswer) {
    auto set = three();
    set.record_answer(0, 100, 0);
    set.record_answer(1, 5000, 0);
    set.record_answer(2, 6000, 0);
    for (uint32_t i = 0; i < kDownAfterFailures; ++i) set.record_timeout(0, 0);
    EXPECT_TRUE(set.at(0).down);
    EXPECT_EQ(set.choose(0, 0), 1);      // down ones are skipped...
    EXPECT_EQ(set.choose(0b110, 0), 0);  // ...unless nothing else is left
    EXPECT_FALSE(set.all_down());
    EXPECT_EQ(set.choose(0b010, 0), 2);  // timeouts made it the slowest
    set.record_answer(0, 100, 0);        // a probe got through
    EXPECT_FALSE(set.at(0).down);
    EXPECT_EQ(set.choose(0, 0), 0);  // and its RTT starts afresh
}

TEST(UpstreamSet, TimeoutMakesAnUnmeasuredUpstreamLoseToAMeasuredOne) {
    auto set = three();
    set.record_answer(1, 5000, 0);
    set.record_answer(2, 6000, 0);
    EXPECT_EQ(set.choose(0, 0), 0);  // unmeasured: tried first
    set.record_timeout(0, 0);
    EXPECT_EQ(set.choose(0, 0), 1);
    EXPECT_FALSE(set.at(0).down);
}

TEST(UpstreamSet, OldPenaltiesFadeSoAnUpstreamIsRemeasured) {
    auto set = three();
    set.record_answer(0, 1000, 0);
    set.record_answer(1, 5000, 0);
    set.record_answer(2, 6000, 0);
    set.record_timeout(0, 0);  // one lost packet: 0 now looks slow
    EXPECT_EQ(set.choose(0, 1000), 1);
    // 1 and 2 keep being measured; 0's penalty halves every kRttDecayMs unrefreshed.
    const uint64_t later = 6 * kRttDecayMs;
    set.record_answer(1, 5000, later);
    set.record_answer(2, 6000, later);
    EXPECT_EQ(set.choose(0, later), 0);
}

TEST(UpstreamSet, AttemptTimeoutFollowsRtt) {
    auto set = three();
    EXPECT_EQ(set.attempt_timeout_ms(0), 400u);  // unmeasured
    set.record_answer(0, 100, 0);                // 0.1 ms: the floor
    EXPECT_EQ(set.attempt_timeout_ms(0), 50u);
    set.record_answer(1, 2'000'000, 0);  // 2 s: the ceiling
    EXPECT_EQ(set.attempt_timeout_ms(1), 1000u);
    set.record_answer(2, 40'000, 0);  // RFC 6298: SRTT + 4 RTTVAR, RTTVAR half the first sample
    EXPECT_EQ(set.attempt_timeout_ms(2), 120u);
}

// Issue 16 item 11: a lost packet doubled the smoothed RTT (to at least the wait), and
// answers brought it down by an eighth each, so after one loss every retry of the next
// dozens of queries waited 400 ms instead of 50; with the wait doubling per retry, the third
// try of a query came after more than a second. A timeout now weighs on the choice of
// server until the next answer, never on the RTT that sets the waits.
TEST(UpstreamSet, AnAnswerAfterALossBringsTheWaitBackToTheRtt) {
    auto set = three();
    for (int i = 0; i < 4; ++i) set.record_answer(0, 1000, 0);
    set.record_timeout(0, 0);
    set.record_answer(0, 1000, 0);
    EXPECT_EQ(set.attempt_timeout_ms(0), 50u);
    EXPECT_LE(set.at(0).srtt_us.load(), 1000u);
}

}  // namespace
}  // namespace nscache::upstream
