#include "upstream/upstream_set.h"

#include <gtest/gtest.h>

namespace nscache::upstream {
namespace {

UpstreamSet three() {
    return UpstreamSet({*parse_socket_address("192.0.2.1:53", std::nullopt),
                        *parse_socket_address("192.0.2.2:53", std::nullopt),
                        *parse_socket_address("192.0.2.3:53", std::nullopt)});
}

TEST(UpstreamSet, PrefersFastestHealthyUntried) {
    auto set = three();
    set.record_answer(0, 5000);
    set.record_answer(1, 1000);
    set.record_answer(2, 3000);
    EXPECT_EQ(set.choose(0), 1);
    EXPECT_EQ(set.choose(0b010), 2);
    EXPECT_EQ(set.choose(0b110), 0);
    EXPECT_EQ(set.choose(0b111), -1);
}

TEST(UpstreamSet, MarksDownAfterRepeatedTimeoutsAndBackOnAnswer) {
    auto set = three();
    set.record_answer(0, 100);
    set.record_answer(1, 5000);
    set.record_answer(2, 6000);
    for (uint32_t i = 0; i < kDownAfterFailures; ++i) set.record_timeout(0);
    EXPECT_TRUE(set.at(0).down);
    EXPECT_EQ(set.choose(0), 1);          // down ones are skipped...
    EXPECT_EQ(set.choose(0b110), 0);      // ...unless nothing else is left
    EXPECT_FALSE(set.all_down());
    EXPECT_EQ(set.choose(0b010), 2);      // timeouts made it the slowest
    set.record_answer(0, 100);            // a probe got through
    EXPECT_FALSE(set.at(0).down);
    EXPECT_EQ(set.choose(0), 0);          // and its RTT starts afresh
}

TEST(UpstreamSet, TimeoutMakesAnUnmeasuredUpstreamLoseToAMeasuredOne) {
    auto set = three();
    set.record_answer(1, 5000);
    set.record_answer(2, 6000);
    EXPECT_EQ(set.choose(0), 0);  // unmeasured: tried first
    set.record_timeout(0);
    EXPECT_EQ(set.choose(0), 1);
    EXPECT_FALSE(set.at(0).down);
}

TEST(UpstreamSet, AttemptTimeoutFollowsRtt) {
    auto set = three();
    EXPECT_EQ(set.attempt_timeout_ms(0), 400u);  // unmeasured
    set.record_answer(0, 100);                   // 0.1 ms: the floor
    EXPECT_EQ(set.attempt_timeout_ms(0), 100u);
    set.record_answer(1, 2'000'000);             // 2 s: the ceiling
    EXPECT_EQ(set.attempt_timeout_ms(1), 1000u);
}

}  // namespace
}  // namespace nscache::upstream
