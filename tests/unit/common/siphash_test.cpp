// SPDX-License-Identifier: BSD-3-Clause
#include "common/siphash.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

// The reference vectors of the SipHash paper (appendix A): key 00..0f, messages 00..(n-1).
TEST(SipHash, MatchesTheReferenceVectors) {
    const SipKey key{0x0706050403020100ull, 0x0f0e0d0c0b0a0908ull};
    uint8_t msg[15];
    for (uint8_t i = 0; i < 15; ++i) msg[i] = i;
    EXPECT_EQ(siphash24(key, msg, 0), 0x726fdb47dd0e0e31ull);
    EXPECT_EQ(siphash24(key, msg, 8), 0x93f5f5799a932462ull);
    EXPECT_EQ(siphash24(key, msg, 15), 0xa129ca6149be45e5ull);
}

}  // namespace
}  // namespace nscache
