// SPDX-License-Identifier: BSD-3-Clause
#include "control/peer_access.h"

#include <gtest/gtest.h>

namespace nscache::control {
namespace {

constexpr uid_t kDaemonUser = 4242;

TEST(PeerAccessTest, RootMayAlwaysTakeOver) {
    EXPECT_TRUE(uid_may_take_over(
        0, {.owner_uid = kDaemonUser, .group = std::nullopt, .owner_switched = true}));
    EXPECT_TRUE(uid_may_take_over(
        0, {.owner_uid = kDaemonUser, .group = std::nullopt, .owner_switched = false}));
}

TEST(PeerAccessTest, TheDaemonsUserMayTakeOverOnlyADaemonThatNeverSwitchedToIt) {
    // Started as that user: it holds nothing that user could not bind or open itself.
    EXPECT_TRUE(uid_may_take_over(
        kDaemonUser, {.owner_uid = kDaemonUser, .group = std::nullopt, .owner_switched = false}));
    // Switched from root: sockets bound as root, the nscd and NSS sockets root's processes
    // trust, the lock files and the cache would go to any process of that user.
    EXPECT_FALSE(uid_may_take_over(
        kDaemonUser, {.owner_uid = kDaemonUser, .group = std::nullopt, .owner_switched = true}));
}

TEST(PeerAccessTest, AnotherUserMayNotTakeOver) {
    EXPECT_FALSE(uid_may_take_over(
        kDaemonUser + 1,
        {.owner_uid = kDaemonUser, .group = std::nullopt, .owner_switched = false}));
    EXPECT_FALSE(
        uid_may_take_over(kDaemonUser + 1, {.owner_uid = kDaemonUser, .group = kDaemonUser + 1}));
}

}  // namespace
}  // namespace nscache::control
