// SPDX-License-Identifier: BSD-3-Clause
#include "common/hash.h"

#include <gtest/gtest.h>

#include <cstring>

namespace nscache {
namespace {

const uint8_t* bytes(const char* text) {
    return reinterpret_cast<const uint8_t*>(text);
}

// The published FNV-1a 64 test vectors: what was written with them must still check.
TEST(Fnv1a, GivesThePublishedValues) {
    EXPECT_EQ(fnv1a(bytes(""), 0), 0xcbf29ce484222325ull);
    EXPECT_EQ(fnv1a(bytes("a"), 1), 0xaf63dc4c8601ec8cull);
    EXPECT_EQ(fnv1a(bytes("foobar"), 6), 0x85944171f73967e8ull);
}

TEST(Fnv1a, HashesPartsAsOneRunOfBytes) {
    const uint64_t whole = fnv1a(bytes("foobar"), 6);
    EXPECT_EQ(fnv1a(bytes("bar"), 3, fnv1a(bytes("foo"), 3)), whole);
}

TEST(SeededHash, DependsOnTheSeed) {
    const char* name = "www.example.test";
    const size_t len = std::strlen(name);
    EXPECT_EQ(seeded_hash(1, bytes(name), len), seeded_hash(1, bytes(name), len));
    EXPECT_NE(seeded_hash(1, bytes(name), len), seeded_hash(2, bytes(name), len));
}

}  // namespace
}  // namespace nscache
