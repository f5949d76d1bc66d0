// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/shared_value.h"

#include <gtest/gtest.h>

#include "cache/cache_test_support.h"

namespace nscache::sharedcache {
namespace {

using cache::testing::negative_answer;
using cache::testing::positive_answer;
using cache::testing::prepare;
using nscache::testing::WireBuilder;

constexpr uint64_t kNow = 1'800'000'000'000;  // ms since the epoch

struct Key {
    dns::NameBuffer name;
    cache::CacheKey key;
    Key(std::string_view text, uint16_t qtype = dns::rtype::A, uint8_t flags = 0) {
        dns::lower_name(dns::name_from_text(text)->view(), name);
        key = cache::CacheKey{name.view(), qtype, dns::kClassIN, flags};
    }
};

cache::PreparedAnswer www_answer(std::initializer_list<uint32_t> ttls = {300}) {
    return *prepare(positive_answer("www.example.test", ttls), cache::TtlPolicy{});
}

uint32_t first_ttl(const cache::PreparedAnswer& a) {
    return dns::read_u32(&a.records[a.ttl_offsets[0]]);
}

TEST(SharedKey, HoldsTheLocalKeysFieldsAndTheFormatVersion) {
    Key www("WWW.Example.test", dns::rtype::AAAA, cache::kKeyDo | cache::kKeyCd);
    EXPECT_EQ(shared_key("nscache:", www.key), "nscache:1:www.example.test.:28:1:3");
    Key odd("a\\.b.example.test");  // a dot inside a label stays escaped: keys never collide
    EXPECT_EQ(shared_key("p/", odd.key), "p/1:a\\.b.example.test.:1:1:0");
}

TEST(SharedValue, RoundTripKeepsTheAnswer) {
    Key www("www.example.test");
    const cache::PreparedAnswer a = www_answer({300, 200});
    const auto value = encode_value(www.key, a, kNow);
    ASSERT_FALSE(value.empty());
    EXPECT_EQ(std::string(value.begin(), value.begin() + 4), "NSC1");
    const DecodedValue d = decode_value(value, www.key, cache::TtlPolicy{}, kNow, false);
    ASSERT_EQ(d.verdict, ValueVerdict::Answer);
    EXPECT_EQ(d.answer->records, a.records);
    EXPECT_EQ(d.answer->ttl_offsets, a.ttl_offsets);
    EXPECT_EQ(d.answer->ttl, 200u);
    EXPECT_EQ(d.answer->ancount, 2);
    EXPECT_EQ(d.answer->kind, cache::AnswerKind::Positive);
}

TEST(SharedValue, TtlsCountDownFromWhenItWasWritten) {
    Key www("www.example.test");
    const auto value = encode_value(www.key, www_answer({300}), kNow);
    const DecodedValue d = decode_value(value, www.key, cache::TtlPolicy{}, kNow + 7'500, false);
    ASSERT_EQ(d.verdict, ValueVerdict::Answer);
    EXPECT_EQ(d.answer->ttl, 292u);  // 300 - 7.5 s, whole seconds left
    EXPECT_EQ(first_ttl(*d.answer), 293u);
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, kNow + 299'001, false).verdict,
              ValueVerdict::Expired);
    // Written "in the future" (another host's clock ahead): never counts up.
    const DecodedValue early =
        decode_value(value, www.key, cache::TtlPolicy{}, kNow - 60'000, false);
    ASSERT_EQ(early.verdict, ValueVerdict::Answer);
    EXPECT_EQ(early.answer->ttl, 300u);
}

TEST(SharedValue, NegativeAnswersKeepTheirRfc2308Ttl) {
    Key nx("gone.example.test");
    auto a = prepare(negative_answer("gone.example.test", dns::Rcode::NxDomain, 600, 60),
                     cache::TtlPolicy{});
    ASSERT_TRUE(a);
    ASSERT_EQ(a->ttl, 60u);
    const DecodedValue d = decode_value(encode_value(nx.key, *a, kNow), nx.key, cache::TtlPolicy{},
                                        kNow + 10'000, false);
    ASSERT_EQ(d.verdict, ValueVerdict::Answer);
    EXPECT_EQ(d.answer->rcode, static_cast<uint8_t>(dns::Rcode::NxDomain));
    EXPECT_EQ(d.answer->kind, cache::AnswerKind::Negative);
    EXPECT_EQ(d.answer->ttl, 50u);
}

TEST(SharedValue, TheReadersMaxTtlBoundsWhatAValueBrings) {
    Key www("www.example.test");
    const auto value = encode_value(www.key, www_answer({86400}), kNow);
    const DecodedValue d =
        decode_value(value, www.key, cache::TtlPolicy{.max_ttl = 100}, kNow + 1'000, false);
    ASSERT_EQ(d.verdict, ValueVerdict::Answer);
    EXPECT_LE(d.answer->ttl, 100u);
    EXPECT_LE(first_ttl(*d.answer), 100u);
}

TEST(SharedValue, EdeOptionsAdBitAndFlagsSurvive) {
    Key www("www.example.test", dns::rtype::A, cache::kKeyDo | cache::kKeyCd);
    cache::PreparedAnswer a = www_answer();
    a.ad = true;
    a.ede = {0x00, 0x0f, 0x00, 0x02, 0x00, 0x03};  // EDE 3, Stale Answer
    const DecodedValue d =
        decode_value(encode_value(www.key, a, kNow), www.key, cache::TtlPolicy{}, kNow, false);
    ASSERT_EQ(d.verdict, ValueVerdict::Answer);
    EXPECT_TRUE(d.answer->ad);
    EXPECT_EQ(d.answer->ede, a.ede);
}

TEST(SharedValue, AValueForAnotherQuestionIsAMismatch) {
    Key www("www.example.test");
    const auto value = encode_value(www.key, www_answer(), kNow);
    Key other("mail.example.test");
    Key aaaa("www.example.test", dns::rtype::AAAA);
    Key with_do("www.example.test", dns::rtype::A, cache::kKeyDo);
    Key with_cd("www.example.test", dns::rtype::A, cache::kKeyCd);
    for (const Key* k : {&other, &aaaa, &with_do, &with_cd}) {
        EXPECT_EQ(decode_value(value, k->key, cache::TtlPolicy{}, kNow, false).verdict,
                  ValueVerdict::Mismatch)
            << shared_key("", k->key);
    }
}

TEST(SharedValue, GarbageIsMalformedAndTooLongIsOversized) {
    Key www("www.example.test");
    auto value = encode_value(www.key, www_answer(), kNow);
    const cache::TtlPolicy policy;
    EXPECT_EQ(decode_value({}, www.key, policy, kNow, false).verdict, ValueVerdict::Malformed);
    auto bad_magic = value;
    bad_magic[3] = '2';  // another format version
    EXPECT_EQ(decode_value(bad_magic, www.key, policy, kNow, false).verdict,
              ValueVerdict::Malformed);
    auto cut = value;
    cut.resize(cut.size() - 3);  // the OPT cut short
    EXPECT_EQ(decode_value(cut, www.key, policy, kNow, false).verdict, ValueVerdict::Malformed);
    auto backwards = value;  // expires before it was written
    std::swap_ranges(backwards.begin() + 4, backwards.begin() + 12, backwards.begin() + 12);
    EXPECT_EQ(decode_value(backwards, www.key, policy, kNow, false).verdict,
              ValueVerdict::Malformed);
    std::vector<uint8_t> huge(kMaxValueBytes + 1, 'x');
    EXPECT_EQ(decode_value(huge, www.key, policy, kNow, false).verdict, ValueVerdict::Oversized);
}

TEST(SharedValue, ServfailAndUncacheableAnswersAreNeverTaken) {
    Key www("www.example.test");
    WireBuilder servfail;
    servfail
        .header(0, dns::flag::QR | dns::flag::RA | static_cast<uint16_t>(dns::Rcode::ServFail), 1)
        .question("www.example.test", dns::rtype::A);
    std::vector<uint8_t> value = {'N', 'S', 'C', '1'};
    for (int i = 0; i < 8; ++i)
        value.push_back(static_cast<uint8_t>((kNow >> (56 - 8 * i)) & 0xFF));
    const uint64_t later = kNow + 60'000;
    for (int i = 0; i < 8; ++i)
        value.push_back(static_cast<uint8_t>((later >> (56 - 8 * i)) & 0xFF));
    value.insert(value.end(), servfail.bytes.begin(), servfail.bytes.end());
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, kNow, false).verdict,
              ValueVerdict::Malformed);
}

TEST(SharedValue, ARefreshTakesOnlyAValueRefreshedSince) {
    Key www("www.example.test");
    const auto value = encode_value(www.key, www_answer({100}), kNow);
    // 95 s on: in the last 10%, as old as the entry being refreshed.
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, kNow + 95'000, true).verdict,
              ValueVerdict::Expired);
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, kNow + 95'000, false).verdict,
              ValueVerdict::Answer);
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, kNow + 50'000, true).verdict,
              ValueVerdict::Answer);
}

}  // namespace
}  // namespace nscache::sharedcache
