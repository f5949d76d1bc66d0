// SPDX-License-Identifier: BSD-3-Clause
#include "server/query_pipeline.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "dns/ede.h"
#include "server_test_support.h"

namespace nscache::server {
namespace {

using testing::ServerHarness;
using testing::WireBuilder;

struct UdpClient {
    sockaddr_storage peer = testing::loopback_peer();
    ClientOrigin origin() const {
        ClientOrigin o;
        o.transport = Transport::Udp;
        o.peer = reinterpret_cast<const sockaddr*>(&peer);
        o.peer_len = sizeof(sockaddr_in);
        return o;
    }
};

WireBuilder query(std::string_view name, uint16_t qtype, uint16_t id = 0x1234) {
    WireBuilder b;
    b.header(id, dns::flag::RD, 1).question(name, qtype);
    return b;
}

uint8_t rcode_of(std::span<const uint8_t> msg) {
    return msg[3] & 0x0F;
}

// A query without RD (RFC 1034 §4.3.1), with an OPT so EDEs can come back.
WireBuilder norec_query(std::string_view name, uint16_t qtype, uint16_t id = 0x4321) {
    WireBuilder b;
    b.header(id, 0, 1, 0, 0, 1).question(name, qtype).opt(1232);
    return b;
}

// The INFO-CODE of the answer's first EDE option, or -1.
int ede_of(std::span<const uint8_t> msg) {
    const size_t n = msg.size();
    if (n < 6 || dns::read_u16(msg.data() + n - 6) != dns::kEdeOptionCode) return -1;
    return dns::read_u16(msg.data() + n - 2);
}

sockaddr_storage peer_v4(uint32_t address) {
    sockaddr_storage ss = testing::loopback_peer();
    reinterpret_cast<sockaddr_in*>(&ss)->sin_addr.s_addr = htonl(address);
    return ss;
}

TEST(QueryPipeline, HitIsAnsweredAtOnceWithoutTheForwarder) {
    ServerHarness h;
    h.cache_a("www.example.test");
    std::vector<uint8_t> out(1232);
    const auto q = query("WWW.example.test", dns::rtype::A);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_TRUE(h.forwarder.resolved.empty());
    EXPECT_EQ(dns::read_u16(out.data()), 0x1234);
    EXPECT_EQ(dns::read_u16(out.data() + 6), 1);  // one answer
    EXPECT_EQ(h.counters.cache_hits.load(), 1u);
}

TEST(QueryPipeline, MissGoesToTheForwarderAndIsAnsweredOnDelivery) {
    ServerHarness h;
    std::vector<uint8_t> out(1232);
    const auto q = query("Miss.example.test", dns::rtype::AAAA, 77);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    EXPECT_TRUE(r.pending);
    EXPECT_EQ(r.reply_length, 0u);
    ASSERT_EQ(h.forwarder.resolved.size(), 1u);
    const auto& asked = h.forwarder.resolved[0].question;
    EXPECT_EQ(dns::name_to_text(asked.name.view()), "miss.example.test.");  // lower-cased
    EXPECT_EQ(asked.qtype, dns::rtype::AAAA);
    h.pipeline.deliver(h.forwarder.resolved[0].cookie, {});
    ASSERT_EQ(h.replies.size(), 1u);
    EXPECT_EQ(dns::read_u16(h.replies[0].data()), 77);
    EXPECT_EQ(rcode_of(h.replies[0]), static_cast<int>(dns::Rcode::ServFail));
    // A second delivery for the same cookie finds no client.
    h.pipeline.deliver(h.forwarder.resolved[0].cookie, {});
    EXPECT_EQ(h.replies.size(), 1u);
}

TEST(QueryPipeline, HitWritesNoLatencyBucket) {
    // The hit path's cost is the product's headline: readers count hits at zero latency from
    // cache_hits instead (control/stats.cpp).
    ServerHarness h;
    h.cache_a("www.example.test");
    std::vector<uint8_t> out(1232);
    h.pipeline.handle(query("www.example.test", dns::rtype::A).view(), UdpClient{}.origin(), out);
    EXPECT_EQ(h.counters.cache_hits.load(), 1u);
    for (const LatencyHistogram& l : h.counters.latency) {
        for (const auto& b : l.buckets) EXPECT_EQ(b.load(), 0u);
    }
}

TEST(QueryPipeline, UpstreamAnswerLatencyRunsFromTheQuerysTurnToTheAnswersTurn) {
    ServerHarness h;
    std::vector<uint8_t> out(1232);
    h.loop.refresh_now();
    const uint64_t read_at = h.loop.now_us();
    h.pipeline.handle(query("slow.example.test", dns::rtype::A).view(), UdpClient{}.origin(), out);
    ASSERT_EQ(h.forwarder.resolved.size(), 1u);
    h.run_for(1, 20);  // a later loop turn, at least 20 ms on
    const uint64_t answered_at = h.loop.now_us();
    ASSERT_GE(answered_at - read_at, 20'000u);
    h.pipeline.deliver(h.forwarder.resolved[0].cookie, {});  // no answer came: SERVFAIL
    ASSERT_EQ(h.replies.size(), 1u);
    const LatencyHistogram& up = h.counters.latency[static_cast<size_t>(AnswerSource::upstream)];
    EXPECT_EQ(up.sum_us.load(), answered_at - read_at);
    EXPECT_EQ(up.buckets[latency_bucket(answered_at - read_at)].load(), 1u);
    EXPECT_EQ(h.counters.latency[static_cast<size_t>(AnswerSource::stale)].sum_us.load(), 0u);
}

TEST(QueryPipeline, ForwarderOverloadIsServfailAtOnce) {
    ServerHarness h;
    h.forwarder.accept = false;
    std::vector<uint8_t> out(1232);
    const auto q = query("x.example.test", dns::rtype::A);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    EXPECT_FALSE(r.pending);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::ServFail));
}

TEST(QueryPipeline, ClientOutsideAllowIsRefusedAndNothingIsForwarded) {
    ServerHarness h;
    UdpClient outsider;
    reinterpret_cast<sockaddr_in*>(&outsider.peer)->sin_addr.s_addr = htonl(0xC0000201);
    std::vector<uint8_t> out(1232);
    const auto q = query("x.example.test", dns::rtype::A);
    const HandleResult r = h.pipeline.handle(q.view(), outsider.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::Refused));
    EXPECT_TRUE(h.forwarder.resolved.empty());
}

TEST(QueryPipeline, AResponseIsIgnored) {
    ServerHarness h;
    WireBuilder b;
    b.header(1, dns::flag::QR, 1).question("x.example.test", dns::rtype::A);
    std::vector<uint8_t> out(1232);
    const HandleResult r = h.pipeline.handle(b.view(), UdpClient{}.origin(), out);
    EXPECT_EQ(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
}

TEST(QueryPipeline, NoRecursionHitIsAnsweredFromTheCacheWithoutPrefetch) {
    ServerHarness h;
    h.cache_a("www.example.test");
    std::vector<uint8_t> out(1232);
    const auto q = norec_query("www.example.test", dns::rtype::A);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::NoError));
    EXPECT_EQ(dns::read_u16(out.data() + 6), 1);  // the cached A record
    EXPECT_FALSE(dns::read_u16(out.data() + 2) & dns::flag::RD);
    EXPECT_TRUE(h.forwarder.resolved.empty());
    EXPECT_TRUE(h.forwarder.refreshed.empty());
}

TEST(QueryPipeline, NoRecursionMissIsRefusedAndNeverForwarded) {
    ServerHarness h;
    std::vector<uint8_t> out(1232);
    const auto q = norec_query("miss.example.test", dns::rtype::A);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_TRUE(h.forwarder.resolved.empty());
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::Refused));
    EXPECT_EQ(ede_of(std::span(out.data(), r.reply_length)), dns::ede::NotAuthoritative);
    EXPECT_EQ(h.counters.answers_refused.load(), 1u);
}

TEST(QueryPipeline, NoRecursionLocalNameIsAnsweredLocally) {
    ServerHarness h;
    h.forwarder.answers_locally = true;
    std::vector<uint8_t> out(1232);
    const auto q = norec_query("version.bind", dns::rtype::TXT);
    const HandleResult r = h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    EXPECT_TRUE(r.pending);
    EXPECT_TRUE(h.forwarder.resolved.empty());
    ASSERT_EQ(h.forwarder.resolved_locally.size(), 1u);
}

TEST(QueryPipeline, NoRecursionFromAClientOutsideAllowSnoopIsRefusedEvenOnAHit) {
    Config c = testing::test_config();
    c.allow.push_back(*parse_cidr("192.0.2.0/24"));
    ServerHarness h(c);
    h.cache_a("www.example.test");
    UdpClient other{peer_v4(0xC0000201)};
    std::vector<uint8_t> out(1232);
    const auto q = norec_query("www.example.test", dns::rtype::A);
    HandleResult r = h.pipeline.handle(q.view(), other.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::Refused));
    EXPECT_EQ(ede_of(std::span(out.data(), r.reply_length)), dns::ede::Prohibited);
    EXPECT_EQ(dns::read_u16(out.data() + 6), 0);
    EXPECT_TRUE(h.forwarder.resolved.empty());
    // With RD the same client gets the cached answer.
    r = h.pipeline.handle(query("www.example.test", dns::rtype::A).view(), other.origin(), out);
    EXPECT_EQ(dns::read_u16(out.data() + 6), 1);
}

TEST(QueryPipeline, AllowSnoopAdmitsNamedClients) {
    Config c = testing::test_config();
    c.allow.push_back(*parse_cidr("192.0.2.0/24"));
    c.allow_snoop = {*parse_cidr("192.0.2.0/24")};
    ServerHarness h(c);
    h.cache_a("www.example.test");
    std::vector<uint8_t> out(1232);
    const auto q = norec_query("www.example.test", dns::rtype::A);
    h.pipeline.handle(q.view(), UdpClient{peer_v4(0xC0000201)}.origin(), out);
    EXPECT_EQ(dns::read_u16(out.data() + 6), 1);
    // Loopback is no longer in the list.
    h.pipeline.handle(q.view(), UdpClient{}.origin(), out);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::Refused));
}

// An answer to `name`'s A question with `count` A records, TTL 300.
std::shared_ptr<const cache::PreparedAnswer> big_a_answer(std::string_view name, size_t count) {
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA, 1, static_cast<uint16_t>(count))
        .question(name, dns::rtype::A);
    for (size_t i = 0; i < count; ++i) {
        b.name_then_pointer("", 12)
            .rr_fixed(dns::rtype::A, 300, 4)
            .raw({10, static_cast<uint8_t>(i >> 16), static_cast<uint8_t>(i >> 8),
                  static_cast<uint8_t>(i)});
    }
    auto answer = cache::testing::prepare(b, cache::TtlPolicy{});
    EXPECT_TRUE(answer);
    return answer ? std::make_shared<const cache::PreparedAnswer>(*answer) : nullptr;
}

void cache_answer(ServerHarness& h, std::string_view name, uint16_t qtype,
                  const cache::PreparedAnswer& answer) {
    dns::NameBuffer lower;
    dns::lower_name(dns::name_from_text(name)->view(), lower);
    h.cache.insert(cache::CacheKey{lower.view(), qtype, dns::kClassIN, 0}, answer, h.loop.now_ms());
}

TEST(QueryPipeline, Type0QueryIsFormErrAndNeverForwarded) {
    // Type 0 is reserved (RFC 6895 §3.1) and the NXDOMAIN cut's marker key: a TYPE0 answer
    // cached there once answered every name below it.
    ServerHarness h;
    std::vector<uint8_t> out(1232);
    const HandleResult r =
        h.pipeline.handle(query("victim.example.test", 0).view(), UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::FormErr));
    EXPECT_TRUE(h.forwarder.resolved.empty());
}

TEST(QueryPipeline, AnyBelowACachedNxdomainIsAnsweredFromTheCut) {
    ServerHarness h;
    auto nx = cache::testing::prepare(
        cache::testing::negative_answer("gone.example.test", dns::Rcode::NxDomain, 600, 60),
        cache::TtlPolicy{});
    ASSERT_TRUE(nx);
    cache_answer(h, "gone.example.test", dns::rtype::A, *nx);
    std::vector<uint8_t> out(1232);
    const HandleResult r = h.pipeline.handle(query("x.gone.example.test", dns::rtype::ANY).view(),
                                             UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::NxDomain));
    EXPECT_TRUE(h.forwarder.resolved.empty());
    EXPECT_EQ(h.counters.nxdomain_cut.load(), 1u);
}

TEST(QueryPipeline, AnyForFailingQuestionsIsServfailWithoutAsking) {
    ServerHarness h;
    h.forwarder.fail_all = true;
    std::vector<uint8_t> out(1232);
    const HandleResult r = h.pipeline.handle(query("dead.example.test", dns::rtype::ANY).view(),
                                             UdpClient{}.origin(), out);
    ASSERT_GT(r.reply_length, 0u);
    EXPECT_FALSE(r.pending);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::ServFail));
    EXPECT_TRUE(h.forwarder.resolved.empty());
    // One half held: the other, failing, is not asked; the held half is the answer.
    h.cache_a("half.example.test");
    const HandleResult half = h.pipeline.handle(query("half.example.test", dns::rtype::ANY).view(),
                                                UdpClient{}.origin(), out);
    ASSERT_GT(half.reply_length, 0u);
    EXPECT_EQ(rcode_of(out), static_cast<int>(dns::Rcode::NoError));
    EXPECT_EQ(dns::read_u16(out.data() + 6), 1);
    EXPECT_TRUE(h.forwarder.resolved.empty());
}

// Each ANY client waiting for its AAAA once kept its own copy of the cached A answer (up to
// 64 KiB): a flood of them pinned hundreds of MB.
TEST(QueryPipeline, AnyWaitersHoldCachedHalvesWithinABudget) {
    ServerHarness h;
    auto big = big_a_answer("big.example.test", 2500);
    ASSERT_TRUE(big);
    cache_answer(h, "big.example.test", dns::rtype::A, *big);
    std::vector<uint8_t> out(1232);
    size_t at_once = 0;
    for (uint16_t i = 0; i < 200; ++i) {
        const HandleResult r = h.pipeline.handle(
            query("big.example.test", dns::rtype::ANY, i).view(), UdpClient{}.origin(), out);
        if (!r.pending && r.reply_length > 0) ++at_once;
    }
    EXPECT_LE(h.pipeline.pending().any_held_bytes(), PendingClients::kMaxAnyHeldBytes);
    EXPECT_GT(h.pipeline.pending().any_held_bytes(), 0u);
    EXPECT_GT(at_once, 0u);  // past the budget: the A half alone, at once (RFC 8482 §4.1)
    EXPECT_EQ(h.forwarder.resolved.size() + at_once, 200u);
    // Answers free what they held.
    for (const auto& call : h.forwarder.resolved) h.pipeline.deliver(call.cookie, {});
    EXPECT_EQ(h.pipeline.pending().any_held_bytes(), 0u);
    EXPECT_EQ(h.pipeline.pending().size(), 0u);
}

TEST(QueryPipeline, AnyFirstAnswersPastTheBudgetAreSentAlone) {
    ServerHarness h;
    std::vector<uint8_t> out(1232);
    constexpr size_t kClients = 200;
    for (size_t i = 0; i < kClients; ++i) {
        const std::string name = "n" + std::to_string(i) + ".example.test";
        ASSERT_TRUE(h.pipeline
                        .handle(query(name, dns::rtype::ANY, static_cast<uint16_t>(i)).view(),
                                UdpClient{}.origin(), out)
                        .pending);
    }
    ASSERT_EQ(h.forwarder.resolved.size(), 2 * kClients);
    const auto calls = h.forwarder.resolved;
    for (const auto& call : calls) {
        if (call.question.qtype != dns::rtype::A) continue;
        upstream::ResolveOutcome outcome;
        outcome.answer = big_a_answer(dns::name_to_text(call.question.name.view()), 2500);
        h.pipeline.deliver(call.cookie, outcome);
    }
    EXPECT_LE(h.pipeline.pending().any_held_bytes(), PendingClients::kMaxAnyHeldBytes);
    EXPECT_GT(h.replies.size(), 0u);  // those past the budget: their A half alone
    EXPECT_EQ(h.forwarder.left.size(), h.replies.size());  // and their AAAA wait is left
    EXPECT_EQ(h.pipeline.pending().size(), kClients - h.replies.size());
    for (const auto& call : calls) h.pipeline.deliver(call.cookie, {});
    EXPECT_EQ(h.replies.size(), kClients);
    EXPECT_EQ(h.pipeline.pending().any_held_bytes(), 0u);
}

}  // namespace
}  // namespace nscache::server
