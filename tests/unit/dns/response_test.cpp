// SPDX-License-Identifier: BSD-3-Clause
#include "dns/response.h"

#include <gtest/gtest.h>

#include <array>
#include <cstring>

#include "dns/name.h"
#include "dns/query.h"
#include "wire_builder.h"

namespace nscache::dns {
namespace {

using testing::WireBuilder;

struct Fixture {
    NameBuffer qname = *name_from_text("www.example.test");
    UpstreamQuestion question() const { return {qname.view(), rtype::A, kClassIN, false, false}; }
};

TEST(WriteUpstreamQuery, IsAQueryWeCanParse) {
    Fixture f;
    std::array<uint8_t, kMaxUpstreamQuery> out{};
    auto q = f.question();
    q.do_bit = true;
    const size_t n = write_upstream_query(q, 0x4242, 1232, out);
    const Header h = read_header(Bytes(out.data(), n));
    EXPECT_EQ(h.id, 0x4242);
    EXPECT_TRUE(h.has(flag::RD));
    EXPECT_EQ(h.arcount, 1);
    EXPECT_EQ(n, 12u + 18 + 4 + 11);
}

// RFC 7873 §4: the COOKIE option (10) inside the OPT record, its RDLENGTH counting it.
TEST(WriteUpstreamQuery, CarriesACookieOption) {
    Fixture f;
    std::array<uint8_t, kMaxUpstreamQuery> out{};
    std::array<uint8_t, kMaxCookieOptionData> cookie{};
    for (size_t i = 0; i < cookie.size(); ++i) cookie[i] = static_cast<uint8_t>(i + 1);
    const size_t plain = 12u + 18 + 4 + 11;
    const size_t n = write_upstream_query(f.question(), 9, 1232, out, Bytes(cookie.data(), 24));
    ASSERT_EQ(n, plain + 4 + 24);
    EXPECT_EQ(read_u16(&out[plain - 2]), 4 + 24);
    EXPECT_EQ(read_u16(&out[plain]), 10);
    EXPECT_EQ(read_u16(&out[plain + 2]), 24);
    EXPECT_EQ(std::memcmp(&out[plain + 4], cookie.data(), 24), 0);
    EXPECT_EQ(parse_query(Bytes(out.data(), n)).verdict, QueryVerdict::Ok);
    // The longest cookie fits the buffer.
    EXPECT_EQ(write_upstream_query(f.question(), 9, 1232, out, cookie), plain + 4 + 40);
}

TEST(PadUpstreamQuery, PadsToA128OctetBlockInsideTheOptRecord) {
    Fixture f;
    std::array<uint8_t, kMaxPaddedUpstreamQuery> out{};
    const size_t plain = write_upstream_query(f.question(), 7, 1232, out);
    const size_t n = pad_upstream_query(out, plain);
    EXPECT_EQ(n, 128u);
    // The query still parses, and its OPT record holds exactly one option: Padding (12).
    const ParsedQuery parsed = parse_query(Bytes(out.data(), n));
    EXPECT_EQ(parsed.verdict, QueryVerdict::Ok);
    EXPECT_TRUE(parsed.query.edns.present);
    const size_t rdlength = read_u16(&out[plain - 2]);
    EXPECT_EQ(plain + rdlength - 4, n - 4);
    EXPECT_EQ(read_u16(&out[plain]), 12);
    EXPECT_EQ(read_u16(&out[plain + 2]), n - plain - 4);
    // A long name (three 63-octet labels) still fits the buffer and ends on a block boundary.
    NameBuffer longest;
    longest.length = 0;
    while (size_t{longest.length} + 64 <= kMaxNameLength - 1) {
        longest.bytes[longest.length] = 63;
        std::memset(longest.bytes + longest.length + 1, 'a', 63);
        longest.length = static_cast<uint8_t>(longest.length + 64);
    }
    longest.bytes[longest.length++] = 0;
    const UpstreamQuestion big{longest.view(), rtype::A, kClassIN, false, false};
    const size_t m = pad_upstream_query(out, write_upstream_query(big, 7, 1232, out));
    EXPECT_EQ(m % 128, 0u);
    EXPECT_LE(m, kMaxPaddedUpstreamQuery);
}

WireBuilder answer_for(uint16_t id, std::string_view qname, uint16_t qtype) {
    WireBuilder b;
    b.header(id, flag::QR | flag::RD | flag::RA, 1, 1).question(qname, qtype);
    b.name_then_pointer("", 12).rr_fixed(rtype::A, 300, 4).raw({192, 0, 2, 1});
    return b;
}

TEST(AnswersQuestion, MatchesIdAndQuestionIgnoringCase) {
    Fixture f;
    EXPECT_TRUE(answers_question(answer_for(7, "WWW.example.test", 1).view(), 7, f.question()));
    EXPECT_FALSE(answers_question(answer_for(8, "www.example.test", 1).view(), 7, f.question()));
    EXPECT_FALSE(answers_question(answer_for(7, "www.example.tesx", 1).view(), 7, f.question()));
    EXPECT_FALSE(answers_question(answer_for(7, "www.example.test", 28).view(), 7, f.question()));
    EXPECT_FALSE(answers_question(answer_for(7, "ww.example.test", 1).view(), 7, f.question()));
    auto not_response = answer_for(7, "www.example.test", 1);
    not_response.bytes[2] &= 0x7F;
    EXPECT_FALSE(answers_question(not_response.view(), 7, f.question()));
}

TEST(ScanResponse, FindsTtlsAndStripsTrailingOpt) {
    auto b = answer_for(1, "www.example.test", 1);
    b.bytes[11] = 1;
    b.opt(1232);
    ScannedResponse scan;
    ASSERT_TRUE(scan_response(b.view(), scan));
    ASSERT_EQ(scan.records.size(), 1u);
    EXPECT_EQ(scan.records[0].ttl, 300u);
    EXPECT_EQ(scan.records_offset, 12u + 18 + 4);
    EXPECT_EQ(scan.records_end, b.size() - 11);
    EXPECT_TRUE(scan.has_opt);
    EXPECT_TRUE(scan.opt_is_last);
}

TEST(ScanResponse, ReadsSoaMinimumAndExtendedRcode) {
    WireBuilder b;
    b.header(1, flag::QR | 3, 1, 0, 1, 1).question("nx.example.test", 1);
    b.name("example.test").rr_fixed(rtype::SOA, 600, 0);
    const size_t rdlen_at = b.size() - 2;
    const size_t rdata_start = b.size();
    b.name_then_pointer("ns", 12 + 3).name_then_pointer("admin", 12 + 3);
    b.u32(1).u32(3600).u32(600).u32(86400).u32(60);
    write_u16(&b.bytes[rdlen_at], static_cast<uint16_t>(b.size() - rdata_start));
    b.u8(0).u16(rtype::OPT).u16(1232).u32(1u << 24).u16(0);  // extended RCODE bits = 1
    ScannedResponse scan;
    ASSERT_TRUE(scan_response(b.view(), scan));
    ASSERT_EQ(scan.records.size(), 1u);
    EXPECT_EQ(scan.records[0].soa_minimum, 60u);
    EXPECT_EQ(scan.records[0].section, Section::Authority);
    EXPECT_EQ(scan.extended_rcode, (1 << 4) | 3);
}

TEST(ScanResponse, RejectsMalformed) {
    ScannedResponse scan;
    auto short_rdata = answer_for(1, "a.test", 1);
    short_rdata.bytes.pop_back();
    EXPECT_FALSE(scan_response(short_rdata.view(), scan));

    auto extra_count = answer_for(1, "a.test", 1);
    extra_count.bytes[7] = 2;
    EXPECT_FALSE(scan_response(extra_count.view(), scan));

    WireBuilder bad_cname;
    bad_cname.header(1, flag::QR, 1, 1).question("a.test", 5);
    bad_cname.name_then_pointer("", 12).rr_fixed(rtype::CNAME, 60, 3).raw({5, 'x', 0});
    EXPECT_FALSE(scan_response(bad_cname.view(), scan));

    WireBuilder opt_in_answer;
    opt_in_answer.header(1, flag::QR, 1, 1).question("a.test", 1).opt(1232);
    EXPECT_FALSE(scan_response(opt_in_answer.view(), scan));
}

TEST(ScanResponse, RejectsNamesThatReadATtl) {
    // An additional record's owner points into the answer's TTL field: each answer rendered
    // from the cache would rewrite that TTL, and with it the name.
    WireBuilder b;
    b.header(1, flag::QR, 1, 1, 0, 1).question("a.test", 1);
    b.name_then_pointer("", 12);
    const size_t ttl = b.size() + 4;
    b.rr_fixed(rtype::A, 0x0001'0178, 4).raw({192, 0, 2, 1});  // TTL bytes 00 01 01 78
    b.name_then_pointer("", static_cast<uint16_t>(ttl + 2)).rr_fixed(rtype::A, 60, 4);
    b.raw({192, 0, 2, 2});
    ScannedResponse scan;
    EXPECT_FALSE(scan_response(b.view(), scan));
}

TEST(ScanResponse, RejectsNamesThatReadPastTheRecords) {
    // The fuzz_upstream_response crash: a name whose last byte lies after the records, where
    // a cached answer has an OPT record of its own instead.
    const uint8_t crash[] = {0x9e, 0x9a, 0x81, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01,
                             0x05, 0x61, 0x6c, 0x68, 0x61, 0x73, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70,
                             0x6c, 0x65, 0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x01, 0x00, 0x01,
                             0xc0, 0x0c, 0x00, 0x05, 0x00, 0x01, 0x00, 0x00, 0x00, 0x3c, 0x00, 0x06,
                             0x03, 0x77, 0x77, 0x77, 0xc0, 0x12, 0xc0, 0x35, 0x00, 0x01, 0x00, 0x01,
                             0x00, 0x00, 0x01, 0x2c, 0x00, 0x04, 0xc0, 0x00, 0x02, 0x01, 0x00, 0x00,
                             0x00, 0x29, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    ScannedResponse scan;
    EXPECT_FALSE(scan_response(Bytes(crash, sizeof crash), scan));
}

TEST(ScanResponse, NotesOptThatIsNotLast) {
    auto b = answer_for(1, "a.test", 1);
    b.bytes[11] = 2;
    b.opt(1232);
    b.name_then_pointer("", 12).rr_fixed(rtype::A, 300, 4).raw({192, 0, 2, 2});
    ScannedResponse scan;
    ASSERT_TRUE(scan_response(b.view(), scan));
    EXPECT_FALSE(scan.opt_is_last);
}

}  // namespace
}  // namespace nscache::dns
