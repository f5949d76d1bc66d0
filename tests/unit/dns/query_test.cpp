// SPDX-License-Identifier: BSD-3-Clause
#include "dns/query.h"

#include <gtest/gtest.h>

#include <algorithm>
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
    const size_t n = write_error_answer(parsed, kRcodeBadVers, 1232, out);
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

    // Type 0 is reserved (RFC 6895 §3.1): never asked upstream, never a cache key. The
    // question is echoed, so the client can tell which of its queries was refused.
    WireBuilder type0;
    type0.header(1, flag::RD, 1).question("a.test", 0);
    const ParsedQuery t0 = parse_query(type0.view());
    EXPECT_EQ(t0.verdict, QueryVerdict::FormErr);
    EXPECT_TRUE(t0.question_valid);

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

// A query whose additional section holds a chain of `chain` backward pointers (in the rdata
// of a private-type record) and then `records` records owned by the chain's last pointer:
// without a cap on hops, each of those records costs the whole chain.
WireBuilder pointer_chain_bomb(int chain, int records) {
    WireBuilder b;
    b.header(0x0B0B, flag::RD, 1, 0, 0, static_cast<uint16_t>(1 + records))
        .question("bomb.test", rtype::A);
    b.u8(0).rr_fixed(65280, 0, static_cast<uint16_t>(2 * chain));
    uint16_t previous = kHeaderSize;  // the question's name
    for (int k = 0; k < chain; ++k) {
        const auto here = static_cast<uint16_t>(b.size());
        b.name_then_pointer("", previous);
        previous = here;
    }
    for (int r = 0; r < records; ++r) b.name_then_pointer("", previous).rr_fixed(rtype::A, 0, 0);
    return b;
}

TEST(ParseQuery, PointerChainBombIsFormErr) {
    // About 4 KB: 1000 pointers, 170 records at the end of the chain, 170,000 hops unbounded.
    const auto bomb = pointer_chain_bomb(1000, 170);
    ASSERT_LE(bomb.size(), 4096u);
    const ParsedQuery parsed = parse_query(bomb.view());
    EXPECT_EQ(parsed.verdict, QueryVerdict::FormErr);
    EXPECT_TRUE(parsed.question_valid);

    // Chains within the cap still parse: the work per record is bounded by the cap.
    EXPECT_EQ(parse_query(pointer_chain_bomb(kMaxPointerHops - 1, 300).view()).verdict,
              QueryVerdict::Ok);
}

TEST(ParseQuery, QuestionStepReadsNoRecords) {
    // The first step passes a query whatever follows its question; the second reads the rest.
    auto bomb = pointer_chain_bomb(1000, 170);
    ParsedQuery parsed = parse_query_question(bomb.view());
    EXPECT_EQ(parsed.verdict, QueryVerdict::Ok);
    EXPECT_EQ(parsed.query.qtype, rtype::A);
    EXPECT_FALSE(parsed.query.edns.present);
    parse_query_records(bomb.view(), parsed);
    EXPECT_EQ(parsed.verdict, QueryVerdict::FormErr);

    auto b = simple_query();
    b.bytes[11] = 1;
    b.opt(4096, true);
    parsed = parse_query_question(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::Ok);
    parse_query_records(b.view(), parsed);
    EXPECT_EQ(parsed.verdict, QueryVerdict::Ok);
    EXPECT_TRUE(parsed.query.edns.present);
    EXPECT_EQ(parsed.query.edns.udp_size, 4096);
}

TEST(ParseQuery, AnswerOrAuthorityRecordsAreFormErr) {
    // Well-formed records, but a query carries none in these sections.
    auto answer = simple_query();
    answer.bytes[7] = 1;  // ancount
    answer.name_then_pointer("", 12).rr_fixed(rtype::A, 300, 4).raw({192, 0, 2, 1});
    ParsedQuery parsed = parse_query(answer.view());
    EXPECT_EQ(parsed.verdict, QueryVerdict::FormErr);
    EXPECT_TRUE(parsed.question_valid);
    EXPECT_EQ(parse_query_question(answer.view()).verdict, QueryVerdict::FormErr);

    auto authority = simple_query();
    authority.bytes[9] = 1;  // nscount
    authority.name_then_pointer("", 12).rr_fixed(rtype::A, 300, 4).raw({192, 0, 2, 1});
    EXPECT_EQ(parse_query(authority.view()).verdict, QueryVerdict::FormErr);
}

TEST(PeekQueryEdns, FindsAnOptRightAfterTheQuestionOnly) {
    auto b = simple_query();
    b.bytes[11] = 2;
    b.opt(4096, true).name_then_pointer("", 12).rr_fixed(rtype::A, 0, 0);
    ParsedQuery parsed = parse_query_question(b.view());
    peek_query_edns(b.view(), parsed);
    EXPECT_TRUE(parsed.query.edns.present);
    EXPECT_TRUE(parsed.query.edns.do_bit);
    EXPECT_EQ(parsed.query.edns.udp_size, 4096);

    auto later = simple_query();
    later.bytes[11] = 2;
    later.name_then_pointer("", 12).rr_fixed(rtype::A, 0, 0).opt(4096);
    parsed = parse_query_question(later.view());
    peek_query_edns(later.view(), parsed);
    EXPECT_FALSE(parsed.query.edns.present);

    auto cut = simple_query();
    cut.bytes[11] = 1;
    cut.opt(4096);
    cut.bytes.pop_back();
    parsed = parse_query_question(cut.view());
    peek_query_edns(cut.view(), parsed);
    EXPECT_FALSE(parsed.query.edns.present);
}

TEST(WriteErrorAnswer, RefusedBeforeRecordsIsNeverLongerThanTheQuery) {
    // What a server sends a refused or rate-limited sender: from the first parsing step and
    // the peeked OPT only.
    std::vector<WireBuilder> queries;
    queries.push_back(simple_query());
    queries.push_back(simple_query());
    queries.back().bytes[11] = 1;
    queries.back().opt(1232, true);
    queries.push_back(simple_query());
    queries.back().bytes[11] = 3;  // OPT, then records never read
    queries.back().opt(1232).name_then_pointer("", 12).rr_fixed(rtype::A, 0, 0).raw({0xC0});
    queries.push_back(pointer_chain_bomb(1000, 10));
    queries.push_back(simple_query(1, 4 << 11));  // NOTIFY
    WireBuilder two;
    two.header(7, 0, 2).question("a.test", 1).question("b.test", 1);
    queries.push_back(two);
    for (const WireBuilder& b : queries) {
        ParsedQuery parsed = parse_query_question(b.view());
        peek_query_edns(b.view(), parsed);
        std::array<uint8_t, kMaxErrorAnswer> out{};
        const size_t n =
            write_error_answer(parsed, static_cast<uint16_t>(Rcode::Refused), 4096, out);
        EXPECT_LE(n, b.size());
        EXPECT_GE(n, kHeaderSize);
    }
}

TEST(WriteErrorAnswer, AdvertisesTheConfiguredUdpSize) {
    WireBuilder b;
    b.header(1, 0, 1, 0, 0, 1).question("example.test", rtype::AXFR).opt(1232);
    auto parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::NotImp);
    std::array<uint8_t, kMaxErrorAnswer> out{};
    for (const uint16_t size : {uint16_t{4096}, uint16_t{1400}}) {
        const size_t n =
            write_error_answer(parsed, static_cast<uint16_t>(Rcode::NotImp), size, out);
        ASSERT_EQ(read_header(Bytes(out.data(), n)).arcount, 1);
        EXPECT_EQ(read_u16(&out[n - kOptRecordSize + 3]), size);  // the OPT's class field
    }
}

TEST(WriteErrorAnswer, EchoesIdQuestionAndBits) {
    auto b = simple_query(0xBEEF, flag::RD | flag::CD);
    auto parsed = parse_query(b.view());
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, static_cast<uint16_t>(Rcode::Refused), 1232, out);
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

TEST(WriteErrorAnswer, NotImpForAnUnknownOpcodeHasNoRaAndNoCd) {
    // RFC 1035 §4.1.1 copies ID, opcode and RD; RA and CD have no meaning for an opcode we do
    // not implement (RFC 6895 §2: flag bits are defined per opcode).
    auto b = simple_query(0xBEEF, (4 << 11) | flag::RD | flag::CD);  // NOTIFY
    auto parsed = parse_query(b.view());
    ASSERT_EQ(parsed.verdict, QueryVerdict::NotImp);
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, static_cast<uint16_t>(Rcode::NotImp), 1232, out);
    const Header h = read_header(Bytes(out.data(), n));
    EXPECT_TRUE(h.has(flag::QR));
    EXPECT_EQ(h.flags & flag::OpcodeMask, 4 << 11);
    EXPECT_TRUE(h.has(flag::RD));
    EXPECT_FALSE(h.has(flag::RA));
    EXPECT_FALSE(h.has(flag::CD));
    EXPECT_EQ(h.rcode(), static_cast<uint8_t>(Rcode::NotImp));
    // A standard query's NOTIMP (AXFR) is still a recursive server's answer: RA, CD echoed.
    WireBuilder axfr;
    axfr.header(1, flag::RD | flag::CD, 1).question("example.test", rtype::AXFR);
    parsed = parse_query(axfr.view());
    write_error_answer(parsed, static_cast<uint16_t>(Rcode::NotImp), 1232, out);
    const Header q = read_header(Bytes(out.data(), kHeaderSize));
    EXPECT_TRUE(q.has(flag::RA));
    EXPECT_TRUE(q.has(flag::CD));
}

TEST(WriteErrorAnswer, FormErrWithoutQuestion) {
    WireBuilder b;
    b.header(7, 0, 2).question("a.test", 1).question("b.test", 1);
    auto parsed = parse_query(b.view());
    std::array<uint8_t, kMaxErrorAnswer> out{};
    const size_t n = write_error_answer(parsed, static_cast<uint16_t>(Rcode::FormErr), 1232, out);
    EXPECT_EQ(n, kHeaderSize);
    EXPECT_EQ(read_header(Bytes(out.data(), n)).qdcount, 0);
}

}  // namespace
}  // namespace nscache::dns
