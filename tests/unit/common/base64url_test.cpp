// SPDX-License-Identifier: BSD-3-Clause
#include "common/base64url.h"

#include <gtest/gtest.h>

#include <string>

namespace nscache {
namespace {

std::vector<uint8_t> bytes_of(std::string_view s) {
    return {s.begin(), s.end()};
}

TEST(Base64Url, DecodesTheRfc4648Vectors) {
    // RFC 4648 §10, padding left out as RFC 8484 sends it.
    EXPECT_EQ(decode_base64url(""), bytes_of(""));
    EXPECT_EQ(decode_base64url("Zg"), bytes_of("f"));
    EXPECT_EQ(decode_base64url("Zm8"), bytes_of("fo"));
    EXPECT_EQ(decode_base64url("Zm9v"), bytes_of("foo"));
    EXPECT_EQ(decode_base64url("Zm9vYg"), bytes_of("foob"));
    EXPECT_EQ(decode_base64url("Zm9vYmE"), bytes_of("fooba"));
    EXPECT_EQ(decode_base64url("Zm9vYmFy"), bytes_of("foobar"));
}

TEST(Base64Url, AcceptsPaddingSomeClientsSend) {
    EXPECT_EQ(decode_base64url("Zg=="), bytes_of("f"));
    EXPECT_EQ(decode_base64url("Zm8="), bytes_of("fo"));
}

TEST(Base64Url, UsesTheUrlSafeAlphabet) {
    const std::vector<uint8_t> high = {0xFB, 0xFF, 0xBF};
    EXPECT_EQ(decode_base64url("-_-_"), high);
    EXPECT_EQ(encode_base64url(high.data(), high.size()), "-_-_");
    EXPECT_FALSE(decode_base64url("+/+/"));  // the standard alphabet's two characters
}

TEST(Base64Url, RefusesWhatNoEncodingIs) {
    EXPECT_FALSE(decode_base64url("Z"));      // one character past a multiple of four
    EXPECT_FALSE(decode_base64url("Zm9vY"));  // likewise
    EXPECT_FALSE(decode_base64url("Zh"));     // unused bits set: not the canonical "Zg"
    EXPECT_FALSE(decode_base64url("Zm 9v"));
    EXPECT_FALSE(decode_base64url("Zm%3D"));
    EXPECT_FALSE(decode_base64url(std::string_view("Zm\0v", 4)));
}

TEST(Base64Url, RoundTripsEveryLength) {
    std::vector<uint8_t> data;
    for (int n = 0; n < 70; ++n) {
        const std::string text = encode_base64url(data.data(), data.size());
        EXPECT_EQ(text.find('='), std::string::npos);
        EXPECT_EQ(decode_base64url(text), data) << n;
        data.push_back(static_cast<uint8_t>(n * 37 + 11));
    }
}

}  // namespace
}  // namespace nscache
