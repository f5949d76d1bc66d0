#include "cache/answer.h"

#include <gtest/gtest.h>

#include "cache_test_support.h"

namespace nscache::cache {
namespace {

using testing::negative_answer;
using testing::positive_answer;
using testing::prepare;

TEST(PrepareAnswer, PositiveTtlIsTheSmallestRecordTtl) {
    auto msg = positive_answer("www.example.test", {300, 120});
    auto a = prepare(msg, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, AnswerKind::Positive);
    EXPECT_EQ(a->ttl, 120u);
    EXPECT_EQ(a->ancount, 2);
    EXPECT_EQ(a->arcount, 0);  // the OPT is not stored
    EXPECT_EQ(a->ttl_offsets.size(), 2u);
}

TEST(PrepareAnswer, ClampsToMinAndMaxTtl) {
    auto msg = positive_answer("www.example.test", {5, 100000});
    auto a = prepare(msg, TtlPolicy{.min_ttl = 30, .max_ttl = 3600});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->ttl, 30u);
    EXPECT_EQ(dns::read_u32(&a->records[a->ttl_offsets[1]]), 3600u);
}

TEST(PrepareAnswer, TopBitTtlReadsAsZero) {
    auto msg = positive_answer("www.example.test", {0x80000000u});
    auto a = prepare(msg, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->ttl, 0u);
}

TEST(PrepareAnswer, NegativeTtlIsMinOfSoaTtlAndMinimum) {
    // RFC 2308 §5: SOA TTL 600, MINIMUM 60 -> 60, and the SOA goes out with TTL 60.
    auto nx = negative_answer("nx.example.test", dns::Rcode::NxDomain, 600, 60);
    auto a = prepare(nx, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, AnswerKind::Negative);
    EXPECT_EQ(a->rcode, 3);
    EXPECT_EQ(a->ttl, 60u);
    EXPECT_EQ(dns::read_u32(&a->records[a->ttl_offsets[0]]), 60u);

    auto nodata = negative_answer("www.example.test", dns::Rcode::NoError, 30, 600);
    a = prepare(nodata, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, AnswerKind::Negative);
    EXPECT_EQ(a->ttl, 30u);

    a = prepare(nx, TtlPolicy{.negative_max_ttl = 10});
    EXPECT_EQ(a->ttl, 10u);
}

TEST(PrepareAnswer, NegativeWithoutSoaIsNotKept) {
    auto msg = testing::empty_answer("nx.example.test", dns::Rcode::NxDomain);
    auto a = prepare(msg, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->ttl, 0u);
}

TEST(PrepareAnswer, ServFailIsKeptBriefly) {
    auto msg = testing::empty_answer("www.example.test", dns::Rcode::ServFail);
    auto a = prepare(msg, TtlPolicy{.servfail_ttl = 3});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->kind, AnswerKind::ServFail);
    EXPECT_EQ(a->ttl, 3u);
}

TEST(PrepareAnswer, RefusedIsNotKept) {
    auto msg = testing::empty_answer("www.example.test", dns::Rcode::Refused);
    auto a = prepare(msg, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->ttl, 0u);
}

TEST(PrepareAnswer, RefusesTruncated) {
    auto msg = positive_answer("www.example.test", {300});
    msg.bytes[2] |= 0x02;  // TC
    EXPECT_FALSE(prepare(msg, TtlPolicy{}));
}

}  // namespace
}  // namespace nscache::cache
