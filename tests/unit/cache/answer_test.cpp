// SPDX-License-Identifier: BSD-3-Clause
#include "cache/answer.h"

#include <gtest/gtest.h>

#include "cache_test_support.h"

namespace nscache::cache {
namespace {

using testing::negative_answer;
using testing::positive_answer;
using testing::prepare;
using testing::WireBuilder;

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
    auto low = prepare(positive_answer("www.example.test", {5}),
                       TtlPolicy{.min_ttl = 30, .max_ttl = 3600});
    ASSERT_TRUE(low);
    EXPECT_EQ(low->ttl, 30u);
    EXPECT_EQ(dns::read_u32(&low->records[low->ttl_offsets[0]]), 30u);
    auto high = prepare(positive_answer("www.example.test", {100000}),
                        TtlPolicy{.min_ttl = 30, .max_ttl = 3600});
    ASSERT_TRUE(high);
    EXPECT_EQ(high->ttl, 3600u);
    EXPECT_EQ(dns::read_u32(&high->records[high->ttl_offsets[0]]), 3600u);
}

// RFC 2181 §5.2: one TTL per RRset, the lowest, from the first answer on.
TEST(PrepareAnswer, RecordsOfOneRRsetShareTheLowestTtl) {
    auto a = prepare(positive_answer("www.example.test", {300, 100, 200}), TtlPolicy{});
    ASSERT_TRUE(a);
    ASSERT_EQ(a->ttl_offsets.size(), 3u);
    for (uint16_t off : a->ttl_offsets) EXPECT_EQ(dns::read_u32(&a->records[off]), 100u);
    EXPECT_EQ(a->ttl, 100u);
}

TEST(PrepareAnswer, DifferentRRsetsKeepTheirOwnTtls) {
    // www CNAME target (TTL 300), target A (TTL 60), target A (TTL 90): two RRsets.
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA, 1, 3, 0, 0)
        .question("www.example.test", dns::rtype::A);
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::CNAME, 300, 9);
    const size_t target = b.size();
    b.name_then_pointer("target", 16);  // "target" + pointer to "example.test" in the question
    b.name_then_pointer("", static_cast<uint16_t>(target))
        .rr_fixed(dns::rtype::A, 60, 4)
        .raw({192, 0, 2, 1});
    b.name_then_pointer("", static_cast<uint16_t>(target))
        .rr_fixed(dns::rtype::A, 90, 4)
        .raw({192, 0, 2, 2});
    auto a = prepare(b, TtlPolicy{});
    ASSERT_TRUE(a);
    ASSERT_EQ(a->ttl_offsets.size(), 3u);
    EXPECT_EQ(dns::read_u32(&a->records[a->ttl_offsets[0]]), 300u);
    EXPECT_EQ(dns::read_u32(&a->records[a->ttl_offsets[1]]), 60u);
    EXPECT_EQ(dns::read_u32(&a->records[a->ttl_offsets[2]]), 60u);
}

TEST(PrepareAnswer, KeepsTheUpstreamsExtendedErrorsOnly) {
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA | 2, 1, 0, 0, 1)
        .question("www.example.test", dns::rtype::A);
    // OPT with a cookie option (10) and an EDE (15) code 6 "DNSSEC Bogus", text "x".
    b.u8(0).u16(dns::rtype::OPT).u16(1232).u32(0).u16(4 + 8 + 4 + 3);
    b.u16(10).u16(8).raw({1, 2, 3, 4, 5, 6, 7, 8});
    b.u16(15).u16(3).u16(6).u8('x');
    auto a = prepare(b, TtlPolicy{});
    ASSERT_TRUE(a);
    EXPECT_EQ(a->ede, (std::vector<uint8_t>{0, 15, 0, 3, 0, 6, 'x'}));
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
