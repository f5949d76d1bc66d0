// SPDX-License-Identifier: BSD-3-Clause
#include "dns/answer_ttl.h"

#include <gtest/gtest.h>

#include "wire_builder.h"

namespace nscache::dns {
namespace {

using testing::WireBuilder;

constexpr uint16_t kResponse = flag::QR | flag::RD | flag::RA;

WireBuilder& a_record(WireBuilder& w, uint32_t ttl) {
    return w.name_then_pointer("", 12).rr_fixed(rtype::A, ttl, 4).raw({192, 0, 2, 1});
}

WireBuilder& soa_record(WireBuilder& w, uint32_t ttl, uint32_t minimum) {
    w.name("example.com").rr_fixed(rtype::SOA, ttl, 3 + 3 + 20);
    return w.u8(1).u8('a').u8(0).u8(1).u8('b').u8(0).u32(1).u32(2).u32(3).u32(4).u32(minimum);
}

TEST(AnswerMinTtl, IsTheSmallestTtlOfEverySection) {
    WireBuilder w;
    w.header(0, kResponse, 1, 2, 0, 1).question("www.example.com", rtype::A);
    a_record(w, 300);
    a_record(w, 120);
    a_record(w, 600);
    EXPECT_EQ(answer_min_ttl(w.view()), 120u);
}

TEST(AnswerMinTtl, LeavesTheOptOut) {
    WireBuilder w;
    w.header(0, kResponse, 1, 1, 0, 1).question("www.example.com", rtype::A);
    a_record(w, 300);
    w.opt(1232);  // its "TTL" field is 0: flags, not a lifetime
    EXPECT_EQ(answer_min_ttl(w.view()), 300u);
}

TEST(AnswerMinTtl, NegativeAnswerUsesTheSoaMinimum) {
    WireBuilder w;
    w.header(0, kResponse | 3, 1, 0, 1).question("nx.example.com", rtype::A);
    soa_record(w, 3600, 60);
    EXPECT_EQ(answer_min_ttl(w.view()), 60u);
    WireBuilder lower;
    lower.header(0, kResponse, 1, 0, 1).question("nx.example.com", rtype::AAAA);
    soa_record(lower, 30, 900);  // the cache counted the SOA's TTL down below its minimum
    EXPECT_EQ(answer_min_ttl(lower.view()), 30u);
}

TEST(AnswerMinTtl, IsZeroForErrorsEmptyAnswersAndGarbage) {
    WireBuilder servfail;
    servfail.header(0, kResponse | 2, 1, 1).question("www.example.com", rtype::A);
    a_record(servfail, 300);
    EXPECT_EQ(answer_min_ttl(servfail.view()), 0u);

    WireBuilder empty;
    empty.header(0, kResponse, 1).question("www.example.com", rtype::A);
    EXPECT_EQ(answer_min_ttl(empty.view()), 0u);

    WireBuilder truncated;
    truncated.header(0, kResponse, 1, 1).question("www.example.com", rtype::A);
    a_record(truncated, 300);
    truncated.bytes.pop_back();
    EXPECT_EQ(answer_min_ttl(truncated.view()), 0u);

    const uint8_t short_message[5] = {};
    EXPECT_EQ(answer_min_ttl(Bytes(short_message, sizeof short_message)), 0u);
}

}  // namespace
}  // namespace nscache::dns
