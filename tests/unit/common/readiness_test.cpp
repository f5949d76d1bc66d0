// SPDX-License-Identifier: BSD-3-Clause
#include "common/readiness.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

TEST(Readiness, MovesForwardOnly) {
    Readiness r;
    EXPECT_EQ(r.state(), ReadinessState::Starting);
    EXPECT_TRUE(r.set_ready());
    EXPECT_EQ(r.state(), ReadinessState::Ready);
    EXPECT_FALSE(r.set_ready());  // already ready: no change
    r.set_draining();
    EXPECT_EQ(r.state(), ReadinessState::Draining);
    EXPECT_FALSE(r.set_ready());  // a draining daemon never turns ready again
    EXPECT_EQ(r.state(), ReadinessState::Draining);
    EXPECT_STREQ(readiness_name(r.state()), "draining");
}

TEST(Readiness, StoppedBeforeReadyDrains) {
    Readiness r;
    r.set_draining();
    EXPECT_FALSE(r.set_ready());
    EXPECT_EQ(r.state(), ReadinessState::Draining);
}

}  // namespace
}  // namespace nscache
