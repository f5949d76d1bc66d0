// SPDX-License-Identifier: BSD-3-Clause
#include "cache/cache.h"

#include "cache/name_set.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

#include "cache_test_support.h"

namespace nscache::cache {
namespace {

using testing::ClientQuery;
using testing::positive_answer;
using testing::prepare;

constexpr uint64_t kStart = 1'000'000;  // an arbitrary monotonic "now", in ms

class CacheTest : public ::testing::Test {
  protected:
    CacheKey key_for(const ClientQuery& q) const {
        return CacheKey{q.lower.view(), q.query().qtype, q.query().qclass, 0};
    }
    void store(Cache& cache, std::string_view name, uint32_t ttl, uint64_t now) {
        ClientQuery q(name, dns::rtype::A);
        auto a = prepare(positive_answer(name, {ttl}), TtlPolicy{});
        ASSERT_TRUE(a);
        cache.insert(key_for(q), *a, now);
    }
    LookupResult find(Cache& cache, std::string_view name, uint64_t now, bool allow_stale = false) {
        ClientQuery q(name, dns::rtype::A);
        return cache.lookup(key_for(q), q.query(), now, RenderLimits{}, out_, allow_stale);
    }
    uint32_t first_ttl(const LookupResult& r, std::string_view name) const {
        // header + question (name + 4) + pointer(2) type(2) class(2) -> TTL
        const size_t at = 12 + dns::name_from_text(name)->length + 4 + 6;
        EXPECT_GT(r.length, at + 4);
        return dns::read_u32(&out_[at]);
    }

    std::array<uint8_t, 4096> out_{};
};

TEST_F(CacheTest, HitRendersClientIdAndQuestionCase) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "www.example.test", 300, kStart);
    ClientQuery q("WwW.ExAmple.TEST", dns::rtype::A, 0xABCD);
    auto r = cache.lookup(key_for(q), q.query(), kStart, RenderLimits{}, out_, false);
    ASSERT_EQ(r.freshness, Freshness::Fresh);
    const auto h = dns::read_header(dns::Bytes(out_.data(), r.length));
    EXPECT_EQ(h.id, 0xABCD);
    EXPECT_EQ(h.ancount, 1);
    EXPECT_EQ(h.arcount, 0);  // the client sent no OPT
    EXPECT_TRUE(
        std::equal(q.query().question.begin(), q.query().question.end(), out_.begin() + 12));
}

TEST_F(CacheTest, TtlCountsDownAndEntryExpires) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "a.example.test", 10, kStart);
    EXPECT_EQ(first_ttl(find(cache, "a.example.test", kStart), "a.example.test"), 10u);
    EXPECT_EQ(first_ttl(find(cache, "a.example.test", kStart + 3500), "a.example.test"), 7u);
    EXPECT_EQ(first_ttl(find(cache, "a.example.test", kStart + 9999), "a.example.test"), 1u);
    EXPECT_EQ(find(cache, "a.example.test", kStart + 10000).freshness, Freshness::Miss);
    EXPECT_EQ(cache.counters().entries, 0u);
    EXPECT_EQ(cache.counters().expirations, 1u);
}

TEST_F(CacheTest, KeyIncludesTypeAndFlags) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "a.example.test", 300, kStart);
    ClientQuery aaaa("a.example.test", dns::rtype::AAAA);
    auto key = key_for(aaaa);
    EXPECT_EQ(cache.lookup(key, aaaa.query(), kStart, RenderLimits{}, out_, false).freshness,
              Freshness::Miss);
    ClientQuery a("a.example.test", dns::rtype::A);
    key = key_for(a);
    key.flags = kKeyDo;
    EXPECT_EQ(cache.lookup(key, a.query(), kStart, RenderLimits{}, out_, false).freshness,
              Freshness::Miss);
}

TEST_F(CacheTest, NegativeEntryServesSoaCountingDown) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    ClientQuery q("nx.example.test", dns::rtype::A);
    auto a = prepare(testing::negative_answer("nx.example.test", dns::Rcode::NxDomain, 600, 60),
                     TtlPolicy{});
    cache.insert(key_for(q), *a, kStart);
    auto r = cache.lookup(key_for(q), q.query(), kStart + 20'000, RenderLimits{}, out_, false);
    ASSERT_EQ(r.freshness, Freshness::Fresh);
    const auto h = dns::read_header(dns::Bytes(out_.data(), r.length));
    EXPECT_EQ(h.rcode(), 3);
    EXPECT_EQ(h.nscount, 1);
    const size_t soa_ttl_at =
        12 + q.query().question.size() + 14 + 4;  // owner "example.test" is 14 bytes
    EXPECT_EQ(dns::read_u32(&out_[soa_ttl_at]), 40u);
    EXPECT_EQ(
        cache.lookup(key_for(q), q.query(), kStart + 60'000, RenderLimits{}, out_, false).freshness,
        Freshness::Miss);
}

TEST_F(CacheTest, NamesBelowACachedNxdomainAreAnsweredFromIt) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    // NXDOMAIN for gone.example.test, its SOA's names compressed against the question.
    testing::WireBuilder nx;
    nx.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA | 3, 1, 0, 1)
        .question("gone.example.test", dns::rtype::A);
    nx.name_then_pointer("", 12 + 5).rr_fixed(dns::rtype::SOA, 600, 2 + 2 + 2 + 2 + 20);
    const size_t mname_at = nx.size();
    nx.name_then_pointer("ns", 12 + 5).name_then_pointer("", 12 + 5);
    nx.u32(1).u32(3600).u32(600).u32(86400).u32(60);
    dns::write_u16(&nx.bytes[mname_at - 2], static_cast<uint16_t>(nx.size() - mname_at));
    auto answer = prepare(nx, TtlPolicy{});
    ASSERT_TRUE(answer);
    ClientQuery gone("gone.example.test", dns::rtype::A);
    cache.insert(key_for(gone), *answer, kStart);

    ClientQuery below("X.y.Gone.Example.Test", dns::rtype::AAAA);
    const CacheKey key = key_for(below);
    const size_t whole = key.name.size() - 1;
    auto r = cache.lookup_below_nxdomain(key, whole, below.query(), kStart + 20'000, RenderLimits{},
                                         out_);
    ASSERT_EQ(r.freshness, Freshness::Fresh);
    const dns::Bytes msg(out_.data(), r.length);
    dns::ScannedResponse scan;
    ASSERT_TRUE(dns::scan_response(msg, scan));
    EXPECT_EQ(scan.header.rcode(), 3);
    EXPECT_EQ(dns::read_u16(out_.data()), 0x5555);  // the client's ID, its question
    ASSERT_EQ(scan.records.size(), 1u);
    EXPECT_EQ(scan.records[0].type, dns::rtype::SOA);
    EXPECT_EQ(scan.records[0].ttl, 40u);  // negative TTL min(600, 60), 20 s on
    dns::NameBuffer owner, mname;
    ASSERT_TRUE(dns::read_name_lower(msg, scan.records[0].owner_offset, owner));
    EXPECT_EQ(dns::name_to_text(owner.view()), "example.test.");
    ASSERT_TRUE(dns::read_name(msg, scan.records[0].ttl_offset + 6, mname));
    EXPECT_EQ(dns::name_to_text(mname.view()), "ns.example.test.");
    // Not above the forwarding rule's domain ("y.gone.example.test" starts at offset 2).
    EXPECT_EQ(
        cache.lookup_below_nxdomain(key, 2, below.query(), kStart, RenderLimits{}, out_).freshness,
        Freshness::Miss);
    // Not for DO, and not once the NXDOMAIN expired.
    const CacheKey with_do{key.name, key.qtype, key.qclass, kKeyDo};
    EXPECT_EQ(
        cache.lookup_below_nxdomain(with_do, whole, below.query(), kStart, RenderLimits{}, out_)
            .freshness,
        Freshness::Miss);
    EXPECT_EQ(
        cache
            .lookup_below_nxdomain(key, whole, below.query(), kStart + 60'000, RenderLimits{}, out_)
            .freshness,
        Freshness::Miss);
    // NODATA is no cut.
    Cache other(CacheConfig{.budget_bytes = 1 << 20});
    auto nodata = prepare(
        testing::negative_answer("gone.example.test", dns::Rcode::NoError, 600, 60), TtlPolicy{});
    other.insert(key_for(gone), *nodata, kStart);
    EXPECT_EQ(other.lookup_below_nxdomain(key, whole, below.query(), kStart, RenderLimits{}, out_)
                  .freshness,
              Freshness::Miss);
}

// The NXDOMAIN-cut marker's key is the cache's own: no answer, from a client's question, a
// cache file or the shared tier, may be stored there (a TYPE0 query once planted a NODATA,
// or a forged NXDOMAIN, that then answered every name below).
TEST_F(CacheTest, NoAnswerIsStoredUnderTheMarkerType) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    ClientQuery victim("victim.example.test", 0);
    auto nodata = prepare(
        testing::negative_answer("victim.example.test", dns::Rcode::NoError, 600, 60), TtlPolicy{});
    ASSERT_TRUE(nodata);
    cache.insert(key_for(victim), *nodata, kStart);
    cache.insert_at(key_for(victim), *nodata, kStart, kStart);
    EXPECT_EQ(cache.counters().entries, 0u);
    EXPECT_EQ(cache.lookup(key_for(victim), victim.query(), kStart, RenderLimits{}, out_, false)
                  .freshness,
              Freshness::Miss);
    ClientQuery below("www.victim.example.test", dns::rtype::A);
    const CacheKey key = key_for(below);
    EXPECT_EQ(cache
                  .lookup_below_nxdomain(key, key.name.size() - 1, below.query(), kStart,
                                         RenderLimits{}, out_)
                  .freshness,
              Freshness::Miss);

    // Nor does an answer stored under type 0 replace a real NXDOMAIN's marker.
    ClientQuery gone("gone.example.test", dns::rtype::A);
    auto nx = prepare(testing::negative_answer("gone.example.test", dns::Rcode::NxDomain, 600, 60),
                      TtlPolicy{});
    ASSERT_TRUE(nx);
    cache.insert(key_for(gone), *nx, kStart);
    const size_t entries = cache.counters().entries;
    ClientQuery gone0("gone.example.test", 0);
    auto positive = prepare(positive_answer("gone.example.test", {300}), TtlPolicy{});
    cache.insert(key_for(gone0), *positive, kStart);
    EXPECT_EQ(cache.counters().entries, entries);
    ClientQuery www("www.gone.example.test", dns::rtype::A);
    const CacheKey www_key = key_for(www);
    auto r = cache.lookup_below_nxdomain(www_key, www_key.name.size() - 1, www.query(), kStart,
                                         RenderLimits{}, out_);
    ASSERT_EQ(r.freshness, Freshness::Fresh);
    EXPECT_EQ(out_[3] & 0x0F, 3);  // NXDOMAIN
}

TEST_F(CacheTest, StaysWithinBudgetByEvicting) {
    const size_t budget = 256 << 10;
    Cache cache(CacheConfig{.budget_bytes = budget, .shards = 4});
    for (int i = 0; i < 20000; ++i)
        store(cache, "n" + std::to_string(i) + ".example.test", 300, kStart);
    const auto c = cache.counters();
    EXPECT_LE(c.bytes, budget);
    EXPECT_GT(c.evictions, 0u);
    EXPECT_GT(c.entries, 1000u);  // full, not refusing: most of the budget holds entries
    EXPECT_EQ(find(cache, "n19999.example.test", kStart).freshness, Freshness::Fresh);
}

TEST_F(CacheTest, ClockKeepsEntriesThatAreHit) {
    // One shard so the sweep order is the insertion order.
    Cache cache(CacheConfig{.budget_bytes = 64 << 10, .shards = 1});
    store(cache, "hot.example.test", 3000, kStart);
    for (int i = 0; i < 5000; ++i) {
        store(cache, "cold" + std::to_string(i) + ".example.test", 3000, kStart);
        ASSERT_EQ(find(cache, "hot.example.test", kStart).freshness, Freshness::Fresh) << i;
    }
    EXPECT_GT(cache.counters().evictions, 1000u);
}

TEST_F(CacheTest, InsertsReclaimExpiredEntries) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    for (int i = 0; i < 100; ++i)
        store(cache, "old" + std::to_string(i) + ".example.test", 5, kStart);
    for (int i = 0; i < 100; ++i) {
        store(cache, "new" + std::to_string(i) + ".example.test", 300, kStart + 10'000);
    }
    const auto c = cache.counters();
    EXPECT_EQ(c.entries, 100u);
    EXPECT_EQ(c.expirations, 100u);
    EXPECT_EQ(c.evictions, 0u);
}

TEST_F(CacheTest, StaleEntriesServedOnlyWhenAllowed) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .stale_ttl_s = 3600});
    store(cache, "s.example.test", 10, kStart);
    const uint64_t later = kStart + 60'000;
    auto r = find(cache, "s.example.test", later);
    EXPECT_EQ(r.freshness, Freshness::Stale);
    EXPECT_EQ(r.length, 0u);
    r = find(cache, "s.example.test", later, true);
    ASSERT_EQ(r.freshness, Freshness::Stale);
    EXPECT_EQ(first_ttl(r, "s.example.test"), kStaleAnswerTtl);
    EXPECT_EQ(find(cache, "s.example.test", kStart + 10'000 + 3'600'000, true).freshness,
              Freshness::Miss);
}

TEST_F(CacheTest, PrefetchOnceForPopularEntryNearExpiry) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "p.example.test", 100, kStart);
    EXPECT_FALSE(find(cache, "p.example.test", kStart).prefetch);
    EXPECT_FALSE(find(cache, "p.example.test", kStart + 80'000).prefetch);  // 20% left
    EXPECT_TRUE(find(cache, "p.example.test", kStart + 95'000).prefetch);
    EXPECT_FALSE(find(cache, "p.example.test", kStart + 96'000).prefetch);  // single flight

    store(cache, "once.example.test", 100, kStart);  // never hit before: not popular
    EXPECT_FALSE(find(cache, "once.example.test", kStart + 95'000).prefetch);
}

TEST_F(CacheTest, FlushRemovesEverything) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 50; ++i)
        store(cache, "f" + std::to_string(i) + ".example.test", 300, kStart);
    EXPECT_EQ(cache.flush(), 50u);
    EXPECT_EQ(cache.counters().entries, 0u);
    EXPECT_EQ(find(cache, "f1.example.test", kStart).freshness, Freshness::Miss);
    store(cache, "f1.example.test", 300, kStart);
    EXPECT_EQ(find(cache, "f1.example.test", kStart).freshness, Freshness::Fresh);
}

TEST_F(CacheTest, FlushNameRemovesOnlyThatName) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "keep.example.test", 300, kStart);
    store(cache, "drop.example.test", 300, kStart);
    ClientQuery aaaa("drop.example.test", dns::rtype::AAAA);
    cache.insert(key_for(aaaa), *prepare(positive_answer("drop.example.test", {300}), TtlPolicy{}),
                 kStart);
    EXPECT_EQ(cache.flush_name(dns::name_from_text("drop.example.test")->view()), 2u);
    EXPECT_EQ(find(cache, "drop.example.test", kStart).freshness, Freshness::Miss);
    EXPECT_EQ(find(cache, "keep.example.test", kStart).freshness, Freshness::Fresh);
}

// The local names and zones of a routing, dropped in one pass (daemon/snapshot.h's
// flush_local_answers): exact names only as themselves, subtrees with every name below.
TEST_F(CacheTest, FlushMatchingRemovesNamesAndSubtreesInOnePass) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    for (const char* name : {"printer.lan", "sub.printer.lan", "localhost", "a.b.localhost",
                             "1.0.0.127.in-addr.arpa", "127.in-addr.arpa", "keep.example.test",
                             "in-addr.arpa", "8.8.8.8.in-addr.arpa", "xlocalhost"}) {
        store(cache, name, 300, kStart);
    }
    NameSet local;
    local.add_name(dns::name_from_text("printer.lan")->view());
    local.add_subtree(dns::name_from_text("localhost")->view());
    local.add_subtree(dns::name_from_text("127.in-addr.arpa")->view());
    EXPECT_EQ(cache.flush_matching(local), 5u);
    for (const char* gone : {"printer.lan", "localhost", "a.b.localhost", "1.0.0.127.in-addr.arpa",
                             "127.in-addr.arpa"}) {
        EXPECT_EQ(find(cache, gone, kStart).freshness, Freshness::Miss) << gone;
    }
    for (const char* kept : {"sub.printer.lan", "keep.example.test", "in-addr.arpa",
                             "8.8.8.8.in-addr.arpa", "xlocalhost"}) {
        EXPECT_EQ(find(cache, kept, kStart).freshness, Freshness::Fresh) << kept;
    }
    EXPECT_EQ(cache.flush_matching(NameSet{}), 0u);
    Cache empty(CacheConfig{.budget_bytes = 1 << 20});
    EXPECT_EQ(empty.flush_matching(local), 0u);
}

TEST_F(CacheTest, TooBigForClientGetsTruncatedAnswer) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    std::initializer_list<uint32_t> many = {300, 300, 300, 300, 300, 300, 300, 300, 300, 300,
                                            300, 300, 300, 300, 300, 300, 300, 300, 300, 300,
                                            300, 300, 300, 300, 300, 300, 300, 300, 300, 300};
    ClientQuery q("big.example.test", dns::rtype::A);
    cache.insert(key_for(q), *prepare(positive_answer("big.example.test", many), TtlPolicy{}),
                 kStart);
    auto r =
        cache.lookup(key_for(q), q.query(), kStart, RenderLimits{.max_size = 200}, out_, false);
    ASSERT_EQ(r.freshness, Freshness::Fresh);
    EXPECT_TRUE(r.truncated);
    const auto h = dns::read_header(dns::Bytes(out_.data(), r.length));
    EXPECT_TRUE(h.has(dns::flag::TC));
    EXPECT_EQ(h.ancount, 0);
    r = cache.lookup(key_for(q), q.query(), kStart, RenderLimits{.max_size = 65535}, out_, false);
    EXPECT_FALSE(r.truncated);
    EXPECT_EQ(dns::read_header(dns::Bytes(out_.data(), r.length)).ancount, 30);
}

TEST_F(CacheTest, JunkTypesOfANameDoNotEvictItsPopularAnswer) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    const std::string_view name = "popular.example.test";
    store(cache, name, 300, kStart);
    ASSERT_EQ(find(cache, name, kStart + 1).freshness, Freshness::Fresh);  // hit: visited
    auto a = prepare(positive_answer(name, {300}), TtlPolicy{});
    for (int i = 0; i < 100; ++i) {
        ClientQuery q(name, static_cast<uint16_t>(2000 + i));
        cache.insert(key_for(q), *a, kStart + 2 + static_cast<uint64_t>(i));
    }
    EXPECT_EQ(find(cache, name, kStart + 200).freshness, Freshness::Fresh);
}

TEST_F(CacheTest, FullChainEvictsItsOldestEntryForANewAnswer) {
    // A client that asks one name for many types fills the name's chain; the answer it then
    // asks for must still get in (it replaces the chain's oldest entry) and nothing else in
    // the cache is touched.
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    const std::string_view name = "many.example.test";
    auto a = prepare(positive_answer(name, {300}), TtlPolicy{});
    ASSERT_TRUE(a);
    constexpr uint16_t kFirstType = 1000;
    constexpr int kTypes = 40;  // more than any chain holds
    for (int i = 0; i < kTypes; ++i) {
        ClientQuery q(name, static_cast<uint16_t>(kFirstType + i));
        cache.insert(key_for(q), *a, kStart + static_cast<uint64_t>(i));
    }
    store(cache, name, 300, kStart + 100);
    auto r = find(cache, name, kStart + 100);
    EXPECT_EQ(r.freshness, Freshness::Fresh);
    EXPECT_EQ(first_ttl(r, name), 300u);

    // The newest types are still there; the oldest made room.
    ClientQuery newest(name, static_cast<uint16_t>(kFirstType + kTypes - 1));
    EXPECT_EQ(
        cache.lookup(key_for(newest), newest.query(), kStart + 100, RenderLimits{}, out_, false)
            .freshness,
        Freshness::Fresh);
    ClientQuery oldest(name, kFirstType);
    EXPECT_EQ(
        cache.lookup(key_for(oldest), oldest.query(), kStart + 100, RenderLimits{}, out_, false)
            .freshness,
        Freshness::Miss);
    EXPECT_LT(cache.counters().entries, static_cast<uint64_t>(kTypes) + 1);
    EXPECT_GT(cache.counters().evictions, 0u);
}

TEST_F(CacheTest, ReplacingAnEntryKeepsOneCopy) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "r.example.test", 300, kStart);
    store(cache, "r.example.test", 600, kStart + 1000);
    EXPECT_EQ(cache.counters().entries, 1u);
    EXPECT_EQ(first_ttl(find(cache, "r.example.test", kStart + 1000), "r.example.test"), 600u);
}

}  // namespace
}  // namespace nscache::cache

namespace nscache::cache {
namespace {

TEST_F(CacheTest, ServFailDoesNotReplaceAnAnswer) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .stale_ttl_s = 3600});
    store(cache, "keep.example.test", 10, kStart);
    ClientQuery q("keep.example.test", dns::rtype::A);
    auto servfail = prepare(testing::empty_answer("keep.example.test", dns::Rcode::ServFail),
                            TtlPolicy{.servfail_ttl = 3});
    cache.insert(key_for(q), *servfail, kStart + 20'000);  // the entry is stale by now
    auto r = find(cache, "keep.example.test", kStart + 20'000, true);
    ASSERT_EQ(r.freshness, Freshness::Stale);
    EXPECT_EQ(dns::read_header(dns::Bytes(out_.data(), r.length)).rcode(), 0);
}

// lookup_answer: the entry's records copied out, with the freshness, age and prefetch rule a
// rendering lookup would give; a precomputed name hash finds the same entry.
TEST_F(CacheTest, LookupAnswerCopiesTheEntryWithItsAgeAndFreshness) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .stale_ttl_s = 600});
    store(cache, "www.example.test", 100, kStart);
    ClientQuery q("www.example.test", dns::rtype::A);
    CacheKey key = key_for(q);
    CachedAnswer a;
    cache.lookup_answer(CacheKey{q.lower.view(), dns::rtype::AAAA, 1, 0}, kStart, a);
    EXPECT_EQ(a.freshness, Freshness::Miss);

    const auto records = [&a] {
        return std::vector<uint8_t>(a.message.begin() + static_cast<ptrdiff_t>(a.records_offset),
                                    a.message.end());
    };
    cache.lookup_answer(key, kStart + 5'500, a);
    ASSERT_EQ(a.freshness, Freshness::Fresh);
    EXPECT_EQ(a.age_s, 5u);
    EXPECT_EQ(a.ancount, 1);
    EXPECT_EQ(a.rcode, 0);
    auto prepared = prepare(positive_answer("www.example.test", {100}), TtlPolicy{});
    EXPECT_EQ(records(), prepared->records);
    EXPECT_TRUE(dns::names_equal_ci(a.qname(), q.lower.view()));
    EXPECT_FALSE(a.prefetch);

    key.name_hash = cache.hash_name(key.name);
    cache.lookup_answer(key, kStart + 95'000, a);  // visited before, in its last 10%
    EXPECT_EQ(a.freshness, Freshness::Fresh);
    EXPECT_TRUE(a.prefetch);
    cache.lookup_answer(key, kStart + 96'000, a);
    EXPECT_FALSE(a.prefetch);  // taken once

    cache.lookup_answer(key, kStart + 101'000, a);
    EXPECT_EQ(a.freshness, Freshness::Stale);
    EXPECT_EQ(records(), prepared->records);
    cache.lookup_answer(key, kStart + 701'000, a);
    EXPECT_EQ(a.freshness, Freshness::Miss);
}

// Review finding 6: lookup_answer copies into the caller's buffer, which, once grown, takes
// every later entry of no greater size without allocating (under the shard's lock).
TEST_F(CacheTest, LookupAnswerReusesTheCallersBuffer) {
    Cache cache(CacheConfig{.budget_bytes = 1 << 20});
    store(cache, "www.example.test", 100, kStart);
    store(cache, "a.example.test", 100, kStart);
    ClientQuery big("www.example.test", dns::rtype::A);
    ClientQuery small("a.example.test", dns::rtype::A);
    CachedAnswer a;
    cache.lookup_answer(key_for(big), kStart, a);
    ASSERT_EQ(a.freshness, Freshness::Fresh);
    const uint8_t* buffer = a.message.data();
    cache.lookup_answer(key_for(small), kStart, a);
    ASSERT_EQ(a.freshness, Freshness::Fresh);
    EXPECT_EQ(a.message.data(), buffer);
    EXPECT_TRUE(dns::names_equal_ci(a.qname(), small.lower.view()));
    cache.lookup_answer(key_for(big), kStart, a);
    EXPECT_EQ(a.message.data(), buffer);
}

// Review finding 8: the cache trusts a key's precomputed name hash (it picks the shard and
// the bucket); one that is not the cache's hash of the name would file an entry where no
// lookup finds it. Checked builds (the tests', the sanitizers': NSCACHE_CHECKS) abort on it.
TEST(CacheDeathTest, NameHashThatIsNotTheCachesHashOfTheNameAborts) {
#ifndef NSCACHE_CHECKS
    GTEST_SKIP() << "a build without NSCACHE_CHECKS";
#endif
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    Cache cache(CacheConfig{.budget_bytes = 1 << 20, .seed = 7});
    ClientQuery q("www.example.test", dns::rtype::A);
    auto a = prepare(positive_answer("www.example.test", {100}), TtlPolicy{});
    ASSERT_TRUE(a);
    CacheKey key{q.lower.view(), dns::rtype::A, dns::kClassIN, 0};
    key.name_hash = cache.hash_name(key.name) ^ 0x100000000ull;
    std::vector<uint8_t> out(4096);
    EXPECT_DEATH(cache.insert(key, *a, kStart), "name_hash");
    EXPECT_DEATH(cache.lookup(key, q.query(), kStart, RenderLimits{}, out, false), "name_hash");
    key.name_hash = cache.hash_name(key.name);  // the right one: stored and found
    cache.insert(key, *a, kStart);
    EXPECT_EQ(cache.lookup(key, q.query(), kStart, RenderLimits{}, out, false).freshness,
              Freshness::Fresh);
}

}  // namespace
}  // namespace nscache::cache
