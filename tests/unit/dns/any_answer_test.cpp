#include "dns/any_answer.h"

#include <gtest/gtest.h>

#include <array>

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

}  // namespace
}  // namespace nscache::dns
