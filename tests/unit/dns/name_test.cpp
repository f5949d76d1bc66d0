// SPDX-License-Identifier: BSD-3-Clause
#include "dns/name.h"

#include <gtest/gtest.h>

#include <array>
#include <vector>

#include "wire_builder.h"

namespace nscache::dns {
namespace {

using testing::WireBuilder;

TEST(NameFromText, RoundTripsThroughText) {
    auto n = name_from_text("www.Example.com");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->length, 17);
    EXPECT_EQ(name_to_text(n->view()), "www.Example.com.");
    auto fq = name_from_text("www.example.com.");
    ASSERT_TRUE(fq);
    EXPECT_EQ(fq->length, 17);
    EXPECT_EQ(name_to_text(name_from_text(".")->view()), ".");
}

TEST(NameFromText, EscapesRoundTrip) {
    auto n = name_from_text("a\\.b\\032c.test");
    ASSERT_TRUE(n);
    EXPECT_EQ(n->bytes[0], 5);  // "a.b c"
    EXPECT_EQ(name_to_text(n->view()), "a\\.b\\032c.test.");
}

TEST(NameFromText, RejectsBadNames) {
    EXPECT_FALSE(name_from_text(""));
    EXPECT_FALSE(name_from_text("a..b"));
    EXPECT_FALSE(name_from_text(".a"));
    EXPECT_FALSE(name_from_text(std::string(64, 'x') + ".test"));
    EXPECT_TRUE(name_from_text(std::string(63, 'x') + ".test"));
    EXPECT_FALSE(name_from_text("bad\\25"));
    EXPECT_FALSE(name_from_text("bad\\999x"));
    // 4 labels of 63 = 256 bytes on the wire with the root: one too many.
    const std::string l63(63, 'a');
    EXPECT_FALSE(name_from_text(l63 + "." + l63 + "." + l63 + "." + l63));
    EXPECT_TRUE(name_from_text(l63 + "." + l63 + "." + l63 + "." + std::string(61, 'a')));
}

TEST(SkipName, FollowsBackwardPointers) {
    WireBuilder b;
    b.header(1, 0, 1).question("example.com", 1);  // name at 12
    const size_t second = b.size();
    b.name_then_pointer("www", 12);
    auto extent = skip_name(b.view(), second);
    ASSERT_TRUE(extent);
    EXPECT_EQ(extent->end, b.size());
    EXPECT_EQ(extent->wire_length, 17u);
    NameBuffer out;
    ASSERT_TRUE(read_name_lower(b.view(), second, out));
    EXPECT_EQ(name_to_text(out.view()), "www.example.com.");
}

TEST(SkipName, RejectsLoopsAndForwardPointers) {
    WireBuilder self;
    self.header(1, 0, 1).name_then_pointer("", 12);  // points at itself
    EXPECT_FALSE(skip_name(self.view(), 12));

    WireBuilder forward;
    forward.header(1, 0, 1).name_then_pointer("a", 20).name("b");
    EXPECT_FALSE(skip_name(forward.view(), 12));

    WireBuilder two_cycle;  // 12 -> 14 would be forward; 14 -> 12 -> 14 loops
    two_cycle.header(1, 0, 1).name_then_pointer("", 14).name_then_pointer("", 12);
    EXPECT_FALSE(skip_name(two_cycle.view(), 14));
}

TEST(SkipName, RejectsPointersIntoTheHeader) {
    // Byte 3 of this header is 0, which reads as the root name: still not a name.
    WireBuilder b;
    b.header(1, 0x8100, 1).question("a.test", 1);
    const size_t at = b.size();
    b.name_then_pointer("mail", 3);
    EXPECT_FALSE(skip_name(b.view(), at));
}

TEST(SkipName, RejectsPointedNamesThatRunPastTheirOwnStart) {
    // The pointer lands on a label that is backwards but reads on over the pointer itself and
    // beyond: no earlier name ends there (found by fuzz_upstream_response).
    WireBuilder b;
    b.header(1, 0, 1).question("a.test", 1);
    const size_t at = b.size();
    b.raw({0xC0, static_cast<uint8_t>(at - 1)}).raw({0, 0, 0});
    b.bytes[at - 1] = 2;  // the question's qclass low byte now reads as a 2-byte label
    EXPECT_FALSE(skip_name(b.view(), at));
}

TEST(SkipName, RejectsPointedNamesThatReadFrozenFields) {
    WireBuilder b;
    b.header(1, 0, 1).question("a.test", 1);
    const size_t label = b.size();
    b.raw({1, 'x', 0});
    const size_t at = b.size();
    b.name_then_pointer("", static_cast<uint16_t>(label));
    EXPECT_TRUE(skip_name(b.view(), at));
    const std::array<size_t, 1> ttl{label + 1};  // a 4-byte field over the label's 'x'
    EXPECT_FALSE(skip_name(b.view(), at, FrozenFields{ttl, 4}));
    const std::array<size_t, 1> before{label - 4};  // ends just before the label
    EXPECT_TRUE(skip_name(b.view(), at, FrozenFields{before, 4}));
}

TEST(SkipName, CapsPointerHopsPerName) {
    // A chain of backward pointers, each pointing at the one before it, the first at a name:
    // the name at the chain's k-th pointer follows k + 1 pointers. Without a cap, records
    // pointing at the end of a long chain cost its whole length each.
    WireBuilder b;
    b.header(1, 0, 1).raw({1, 'a', 0});
    uint16_t previous = 12;
    std::vector<size_t> chain;
    for (int k = 0; k <= kMaxPointerHops; ++k) {
        chain.push_back(b.size());
        b.name_then_pointer("", previous);
        previous = static_cast<uint16_t>(chain.back());
    }
    auto at_cap = skip_name(b.view(), chain[kMaxPointerHops - 1]);
    ASSERT_TRUE(at_cap);
    EXPECT_EQ(at_cap->wire_length, 3u);
    NameBuffer out;
    EXPECT_TRUE(read_name(b.view(), chain[kMaxPointerHops - 1], out));
    EXPECT_FALSE(skip_name(b.view(), chain[kMaxPointerHops]));
    EXPECT_FALSE(read_name(b.view(), chain[kMaxPointerHops], out));
}

TEST(SkipName, RejectsTruncatedAndOversized) {
    WireBuilder b;
    b.header(1, 0, 1).raw({5, 'a', 'b'});
    EXPECT_FALSE(skip_name(b.view(), 12));

    WireBuilder long_label;
    long_label.header(1, 0, 1).u8(64);
    for (int i = 0; i < 64; ++i) long_label.u8('a');
    long_label.u8(0);
    EXPECT_FALSE(skip_name(long_label.view(), 12));  // 0x40 is a reserved label type

    WireBuilder too_long;  // 128 labels of 1 byte = 257 bytes with the root
    too_long.header(1, 0, 1);
    for (int i = 0; i < 128; ++i) too_long.raw({1, 'a'});
    too_long.u8(0);
    EXPECT_FALSE(skip_name(too_long.view(), 12));

    WireBuilder pointer_cut;
    pointer_cut.header(1, 0, 1).u8(0xC0);
    EXPECT_FALSE(skip_name(pointer_cut.view(), 12));
}

TEST(SkipUncompressedName, RejectsAnyPointer) {
    WireBuilder b;
    b.header(1, 0, 1).question("a.test", 1);
    const size_t at = b.size();
    b.name_then_pointer("x", 12);
    EXPECT_TRUE(skip_name(b.view(), at));
    EXPECT_FALSE(skip_uncompressed_name(b.view(), at));
}

TEST(NamesEqual, IgnoresCaseOnly) {
    auto a = name_from_text("WwW.ExAmple.TEST");
    auto b = name_from_text("www.example.test");
    auto c = name_from_text("www.example.tesu");
    EXPECT_TRUE(names_equal_ci(a->view(), b->view()));
    EXPECT_FALSE(names_equal_ci(a->view(), c->view()));
    NameBuffer lowered;
    lower_name(a->view(), lowered);
    EXPECT_EQ(name_to_text(lowered.view()), "www.example.test.");
}

}  // namespace
}  // namespace nscache::dns

namespace nscache::dns {
namespace {

TEST(LowerName, WordAtATimeMatchesBytewiseForEveryByte) {
    uint8_t all[255];
    for (int start = 0; start < 2; ++start) {
        for (int i = 0; i < 255; ++i) all[i] = static_cast<uint8_t>(i + start);
        NameBuffer out;
        lower_name(Bytes(all, 255), out);
        for (int i = 0; i < 255; ++i) ASSERT_EQ(out.bytes[i], ascii_lower(all[i])) << i;
    }
}

}  // namespace
}  // namespace nscache::dns
