#include "dns/query.h"

#include <gtest/gtest.h>

#include <array>

#include "wire_builder.h"

namespace nscache::dns {
namespace {

using testing::WireBuilder;

WireBuilder simple_query(uint16_t id = 0x1234, uint16_t flags = flag::RD) {
    WireBuilder b;
    b.header(id, flags, 1).question("WwW.Example.TEST", rtype::A);
    return b;
}

TEST(ParseQuery, AcceptsPlainQuery) {
    auto b = simple_query();
    auto parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::Ok);
    EXPECT_EQ(parsed.query.header.id, 0x1234);
    EXPECT_EQ(parsed.query.qtype, rtype::A);
    EXPECT_EQ(parsed.query.qclass, kClassIN);
    EXPECT_EQ(parsed.query.qname.size(), 18u);
    EXPECT_EQ(parsed.query.question.size(), 22u);
    EXPECT_FALSE(parsed.query.edns.present);
    EXPECT_TRUE(parsed.query.rd());
}

TEST(ParseQuery, ReadsEdns) {
    auto b = simple_query();
    b.bytes[11] = 1;  // arcount
    b.opt(4096, true);
    auto parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::Ok);
    EXPECT_TRUE(parsed.query.edns.present);
    EXPECT_TRUE(parsed.query.edns.do_bit);
    EXPECT_EQ(parsed.query.edns.udp_size, 4096);
}

TEST(ParseQuery, RaisesTinyEdnsBufferTo512) {
    auto b = simple_query();
    b.bytes[11] = 1;
    b.opt(100);
    EXPECT_EQ(parse_query(b.view()).query.edns.udp_size, 512);
}

TEST(ParseQuery, EdnsVersionOneIsBadVers) {
    auto b = simple_query();
    b.bytes[11] = 1;
    b.opt(1232, false, 1);
    auto parsed = parse_query(b.view());
    EXPECT_EQ(parsed.verdict, QueryVerdict::BadVers);
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, kRcodeBadVers, out);
    const Header h = read_header(Bytes(out.data(), n));
    EXPECT_EQ(h.rcode(), 0);  // low bits of 16
    EXPECT_EQ(h.arcount, 1);
    EXPECT_EQ(out[n - 11 + 5], 1);  // OPT TTL high byte: extended RCODE 16 >> 4
}

TEST(ParseQuery, IgnoresResponsesAndRunts) {
    auto b = simple_query(1, flag::QR);
    EXPECT_EQ(parse_query(b.view()).verdict, QueryVerdict::Ignore);
    const uint8_t runt[5] = {1, 2, 3, 4, 5};
    EXPECT_EQ(parse_query(Bytes(runt, 5)).verdict, QueryVerdict::Ignore);
    EXPECT_EQ(parse_query(Bytes()).verdict, QueryVerdict::Ignore);
}

TEST(ParseQuery, NotImpForOtherOpcodesAndTransfers) {
    auto notify = simple_query(1, 4 << 11);
    EXPECT_EQ(parse_query(notify.view()).verdict, QueryVerdict::NotImp);
    WireBuilder axfr;
    axfr.header(1, 0, 1).question("example.test", rtype::AXFR);
    EXPECT_EQ(parse_query(axfr.view()).verdict, QueryVerdict::NotImp);
}

TEST(ParseQuery, FormErrCases) {
    WireBuilder none;
    none.header(1, 0, 0);
    EXPECT_EQ(parse_query(none.view()).verdict, QueryVerdict::FormErr);

    WireBuilder two;
    two.header(1, 0, 2).question("a.test", 1).question("b.test", 1);
    EXPECT_EQ(parse_query(two.view()).verdict, QueryVerdict::FormErr);

    WireBuilder compressed;
    compressed.header(1, 0, 1).name_then_pointer("a", 12).u16(1).u16(1);
    EXPECT_EQ(parse_query(compressed.view()).verdict, QueryVerdict::FormErr);

    WireBuilder no_type;
    no_type.header(1, 0, 1).name("a.test").u16(1);
    EXPECT_EQ(parse_query(no_type.view()).verdict, QueryVerdict::FormErr);

    WireBuilder opt_question;
    opt_question.header(1, 0, 1).question("a.test", rtype::OPT);
    EXPECT_EQ(parse_query(opt_question.view()).verdict, QueryVerdict::FormErr);

    auto two_opts = simple_query();
    two_opts.bytes[11] = 2;
    two_opts.opt(1232).opt(1232);
    EXPECT_EQ(parse_query(two_opts.view()).verdict, QueryVerdict::FormErr);

    auto missing_record = simple_query();
    missing_record.bytes[11] = 1;  // arcount 1, nothing there
    EXPECT_EQ(parse_query(missing_record.view()).verdict, QueryVerdict::FormErr);

    auto opt_in_answer = simple_query();
    opt_in_answer.bytes[7] = 1;
    opt_in_answer.opt(1232);
    EXPECT_EQ(parse_query(opt_in_answer.view()).verdict, QueryVerdict::FormErr);
}

TEST(WriteErrorAnswer, EchoesIdQuestionAndBits) {
    auto b = simple_query(0xBEEF, flag::RD | flag::CD);
    auto parsed = parse_query(b.view());
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, static_cast<uint16_t>(Rcode::Refused), out);
    ASSERT_EQ(n, b.size());
    const Header h = read_header(Bytes(out.data(), n));
    EXPECT_EQ(h.id, 0xBEEF);
    EXPECT_TRUE(h.has(flag::QR));
    EXPECT_TRUE(h.has(flag::RD));
    EXPECT_TRUE(h.has(flag::CD));
    EXPECT_EQ(h.rcode(), static_cast<uint8_t>(Rcode::Refused));
    EXPECT_EQ(h.qdcount, 1);
    EXPECT_TRUE(std::equal(b.bytes.begin() + 12, b.bytes.end(), out.begin() + 12));
}

TEST(WriteErrorAnswer, FormErrWithoutQuestion) {
    WireBuilder b;
    b.header(7, 0, 2).question("a.test", 1).question("b.test", 1);
    auto parsed = parse_query(b.view());
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, static_cast<uint16_t>(Rcode::FormErr), out);
    EXPECT_EQ(n, kHeaderSize);
    EXPECT_EQ(read_header(Bytes(out.data(), n)).qdcount, 0);
}

}  // namespace
}  // namespace nscache::dns
