// SPDX-License-Identifier: BSD-3-Clause
#include "common/result.h"

#include <gtest/gtest.h>

#include <string>

namespace nscache {
namespace {

Result<int> parse_digit(char c) {
    if (c < '0' || c > '9') return Error{std::string("not a digit: ") + c};
    return c - '0';
}

Result<void> check_even(int n) {
    if (n % 2 != 0) return Error{"odd"};
    return {};
}

TEST(Result, HoldsAValueOrAMessage) {
    const auto seven = parse_digit('7');
    ASSERT_TRUE(seven.ok());
    EXPECT_EQ(*seven, 7);
    const auto bad = parse_digit('x');
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error(), "not a digit: x");
}

TEST(Result, VoidResultCarriesOnlyTheMessage) {
    EXPECT_TRUE(check_even(4).ok());
    const auto odd = check_even(3);
    ASSERT_FALSE(odd.ok());
    EXPECT_EQ(odd.error(), "odd");
}

TEST(ResultDeathTest, ReadingTheWrongSideAborts) {
    EXPECT_DEATH((void)parse_digit('x').value(), "");
    EXPECT_DEATH((void)parse_digit('1').error(), "");
}

}  // namespace
}  // namespace nscache
