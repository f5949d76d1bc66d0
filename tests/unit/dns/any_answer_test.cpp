// SPDX-License-Identifier: BSD-3-Clause
#include "dns/any_answer.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "dns/response.h"
#include "wire_builder.h"

namespace nscache::dns {
namespace {

using testing::WireBuilder;

TEST(WriteAnyAnswer, OneSynthesizedHinfoForTheQuestion) {
    WireBuilder b;
    b.header(0x4321, flag::RD | flag::CD, 1, 0, 0, 1).question("Any.Example.TEST", rtype::ANY);
    b.opt(1232, true);
    const ParsedQuery parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::Ok);
    std::array<uint8_t, kMaxAnyAnswer> out{};
    const size_t n = write_any_answer(parsed.query, 4096, out);
    ASSERT_LE(n, kMaxAnyAnswer);
    const Bytes msg(out.data(), n);

    const Header h = read_header(msg);
    EXPECT_EQ(h.id, 0x4321);
    EXPECT_TRUE(h.has(flag::QR) && h.has(flag::RA) && h.has(flag::RD) && h.has(flag::CD));
    EXPECT_FALSE(h.has(flag::AA) || h.has(flag::TC));
    EXPECT_EQ(h.rcode(), 0);
    EXPECT_TRUE(std::equal(parsed.query.question.begin(), parsed.query.question.end(),
                           out.begin() + kHeaderSize));  // case kept

    ScannedResponse scan;
    ASSERT_TRUE(scan_response(msg, scan));
    ASSERT_EQ(scan.records.size(), 1u);
    EXPECT_EQ(scan.records[0].type, rtype::HINFO);
    EXPECT_EQ(scan.records[0].ttl, kAnyAnswerTtl);
    EXPECT_TRUE(scan.has_opt);
    const size_t rdata = scan.records_end - kAnyAnswerRdataSize;
    const uint8_t hinfo[] = {7, 'R', 'F', 'C', '8', '4', '8', '2', 0};
    EXPECT_TRUE(std::equal(std::begin(hinfo), std::end(hinfo), out.begin() + rdata));
    EXPECT_EQ(read_u16(&out[n - kOptRecordSize + 3]), 4096);  // our UDP size
    EXPECT_NE(out[n - kOptRecordSize + 7] & 0x80, 0);         // DO echoed
}

TEST(WriteAnyAnswer, NoOptWithoutEdnsAndClassInForClassAny) {
    WireBuilder b;
    b.header(1, flag::RD, 1).question("x.test", rtype::ANY, 255);
    const ParsedQuery parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::Ok);
    std::array<uint8_t, kMaxAnyAnswer> out{};
    const size_t n = write_any_answer(parsed.query, 1232, out);
    EXPECT_EQ(read_header(Bytes(out.data(), n)).arcount, 0);
    EXPECT_EQ(n, b.size() + 12 + kAnyAnswerRdataSize);
    EXPECT_EQ(read_u16(&out[b.size() + 4]), kClassIN);
}

// A response to the ANY query `q` as the pipeline renders the A or AAAA answer for it: a CNAME
// from the name to alias.<name> (with `via_cname`), then one record of `type` owned by the
// last name.
std::vector<uint8_t> part(const Query& q, uint16_t type, bool via_cname) {
    WireBuilder b;
    b.header(q.header.id, flag::QR | flag::RA | flag::RD, 1, via_cname ? 2 : 1);
    b.bytes.insert(b.bytes.end(), q.question.begin(), q.question.end());
    const size_t size = type == rtype::A ? 4 : 16;
    if (via_cname) {
        b.u16(0xC00C).rr_fixed(rtype::CNAME, 60, 8).name_then_pointer("alias", 0x0C);
        b.name("target.test").rr_fixed(type, 60, static_cast<uint16_t>(size));
    } else {
        b.u16(0xC00C).rr_fixed(type, 60, static_cast<uint16_t>(size));
    }
    for (size_t i = 0; i < size; ++i) b.u8(static_cast<uint8_t>(i + 1));
    return b.bytes;
}

ParsedQuery any_query() {
    static WireBuilder b;
    b = WireBuilder();
    b.header(7, flag::RD, 1).question("Dual.Example.TEST", rtype::ANY);
    return parse_query(b.view());
}

TEST(WriteAnyFromParts, TakesTheNamesAAndAaaaRecords) {
    const ParsedQuery parsed = any_query();
    const auto a = part(parsed.query, rtype::A, false);
    const auto aaaa = part(parsed.query, rtype::AAAA, false);
    const Bytes parts[2] = {Bytes(a), Bytes(aaaa)};
    std::array<uint8_t, 1232> out{};
    bool truncated = true;
    const size_t n = write_any_from_parts(parsed.query, parts, 1232, 512, out, &truncated);
    ASSERT_GT(n, 0u);
    EXPECT_FALSE(truncated);
    ScannedResponse scan;
    ASSERT_TRUE(scan_response(Bytes(out.data(), n), scan));
    ASSERT_EQ(scan.records.size(), 2u);
    EXPECT_EQ(scan.records[0].type, rtype::A);
    EXPECT_EQ(scan.records[1].type, rtype::AAAA);
    EXPECT_EQ(read_u16(out.data()), 7);
    // Too large for the client: empty with TC.
    const size_t small = write_any_from_parts(parsed.query, parts, 1232, n - 1, out, &truncated);
    EXPECT_TRUE(truncated);
    EXPECT_EQ(read_header(Bytes(out.data(), small)).ancount, 0);
}

TEST(WriteAnyFromParts, ACnameTargetsRecordsAreNotTheNames) {
    const ParsedQuery parsed = any_query();
    const auto a = part(parsed.query, rtype::A, true);
    const auto aaaa = part(parsed.query, rtype::AAAA, true);
    const Bytes parts[2] = {Bytes(a), Bytes(aaaa)};
    std::array<uint8_t, 1232> out{};
    bool truncated = false;
    const size_t n = write_any_from_parts(parsed.query, parts, 1232, 1232, out, &truncated);
    ScannedResponse scan;
    ASSERT_TRUE(scan_response(Bytes(out.data(), n), scan));
    ASSERT_EQ(scan.records.size(), 1u);
    EXPECT_EQ(scan.records[0].type, rtype::HINFO);
}

TEST(WriteAnyFromParts, AFailedPartWithNothingElseIsServfailForTheCaller) {
    const ParsedQuery parsed = any_query();
    const auto a = part(parsed.query, rtype::A, false);
    std::array<uint8_t, 1232> out{};
    bool truncated = false;
    const Bytes failed[2] = {Bytes(), Bytes()};
    EXPECT_EQ(write_any_from_parts(parsed.query, failed, 1232, 1232, out, &truncated), 0u);
    // One answered: its records are the answer (a subset is what RFC 8482 allows).
    const Bytes half[2] = {Bytes(), Bytes(a)};
    const size_t n = write_any_from_parts(parsed.query, half, 1232, 1232, out, &truncated);
    EXPECT_EQ(read_header(Bytes(out.data(), n)).ancount, 1);
}

}  // namespace
}  // namespace nscache::dns
