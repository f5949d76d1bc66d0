// SPDX-License-Identifier: BSD-3-Clause
// HostLookup on an EventLoop driven by the fake clock, against a loopback UDP upstream the
// test answers by hand (upstream_test_support.h). The cache reads no clock of its own: every
// lookup and insert is given the loop's now_ms(), so advancing the fake clock ages its entries.
#include "hostdb/host_lookup.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <map>

#include "../cache/cache_test_support.h"
#include "../upstream/upstream_test_support.h"
#include "cache/render.h"
#include "fake_clock.h"

namespace nscache::hostdb {
namespace {

using upstream::testing::a_record;
using upstream::testing::answer_to;
using upstream::testing::ManualUpstream;

constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;

std::vector<uint8_t> aaaa_record(uint32_t ttl, uint8_t last_octet) {
    nscache::testing::WireBuilder b;
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::AAAA, ttl, 16);
    b.raw({0x20, 0x01, 0x0d, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, last_octet});
    return b.bytes;
}

// A temporary file, removed with the object.
struct TempFile {
    std::string path;
    explicit TempFile(const std::string& text) {
        char name[] = "/tmp/nscache-host-lookup-XXXXXX";
        const int fd = mkstemp(name);
        EXPECT_GE(fd, 0);
        close(fd);
        path = name;
        std::ofstream(path) << text;
    }
    ~TempFile() { std::remove(path.c_str()); }
};

struct RecordingHostSink final : HostSink {
    std::map<uint64_t, std::vector<HostAnswer>> answers;
    void host_done(uint64_t cookie, const HostAnswer& answer) override {
        answers[cookie].push_back(answer);
    }
};

HostLookupOptions options_for(const std::string& hosts_path, const std::string& resolv_conf) {
    HostLookupOptions options;
    options.hosts = {hosts_path, "/nonexistent/host.conf"};
    options.resolv_conf = resolv_conf;
    return options;
}

struct HostHarness {
    explicit HostHarness(const std::string& hosts_text = "")
        : hosts(hosts_text),
          cache(cache::CacheConfig{.budget_bytes = size_t{1} << 20, .stale_ttl_s = 3600}),
          routing(make_routing()),
          loop(clock),
          shared{upstream::ResolverOptions{}, cache, {}, {}},
          lookup(0, loop, shared, counters, sink, routing,
                 // A resolv.conf path other than /etc/resolv.conf: glibc's defaults, no search
                 // list (search_list.cpp), whatever the machine's file says.
                 options_for(hosts.path, "/nonexistent/resolv")) {
        shared.queues.push_back(&lookup.completion_queue());
        loop.refresh_now();
        lookup.open([] {});
    }

    // A HostLookup that reads the search list from /etc/resolv.conf (and the environment).
    void use_system_resolv_conf() {
        system_lookup.emplace(0, loop, shared, counters, sink, routing,
                              options_for(hosts.path, "/etc/resolv.conf"));
        shared.queues[0] = &system_lookup->completion_queue();
        system_lookup->open([] {});
    }
    // A HostLookup with this search list and ndots:1.
    void use_search_list(std::vector<std::string> domains) {
        HostLookupOptions options = options_for(hosts.path, "/nonexistent/resolv");
        options.search_config = SearchConfig{};
        options.search_config->domains = std::move(domains);
        system_lookup.emplace(0, loop, shared, counters, sink, routing, std::move(options));
        shared.queues[0] = &system_lookup->completion_queue();
        system_lookup->open([] {});
    }
    HostLookup& active() { return system_lookup ? *system_lookup : lookup; }

    std::shared_ptr<const upstream::Routing> make_routing() {
        Config c;
        c.upstreams.push_back(fake.address);
        c.forward_private_zones = true;  // the tests ask .test names only
        return upstream::Routing::build(c, registry);
    }

    // Turns the loop until the fake upstream has a query (real time passes only in poll).
    std::optional<ManualUpstream::Received> next_query() {
        for (int i = 0; i < 400; ++i) {
            if (auto q = fake.take_udp()) return q;
            loop.run_once(5, [this] { active().drain(); });
        }
        return std::nullopt;
    }
    // Turns the loop until `cookie` has an answer.
    bool wait_for(uint64_t cookie) {
        for (int i = 0; i < 400; ++i) {
            if (sink.answers.count(cookie) != 0) return true;
            loop.run_once(5, [this] { active().drain(); });
        }
        return false;
    }
    // Runs a few more turns: nothing more may come.
    void settle() {
        for (int i = 0; i < 10; ++i) loop.run_once(1, [this] { active().drain(); });
    }

    static std::string qname_of(const ManualUpstream::Received& q) {
        const dns::ParsedQuery parsed = dns::parse_query(dns::Bytes(q.msg));
        std::string t = dns::name_to_text(parsed.query.qname);
        return t;
    }
    static uint16_t qtype_of(const ManualUpstream::Received& q) {
        return dns::parse_query(dns::Bytes(q.msg)).query.qtype;
    }

    // The TTL a DNS client gets for (name, qtype) from the cache now (stale allowed).
    uint32_t dns_ttl(const std::string& name, uint16_t qtype, bool stale) {
        nscache::testing::WireBuilder b;
        b.header(1, dns::flag::RD, 1).question(name, qtype);
        const dns::ParsedQuery parsed = dns::parse_query(b.view());
        upstream::Question question;
        dns::lower_name(parsed.query.qname, question.name);
        question.qtype = qtype;
        question.qclass = dns::kClassIN;
        std::vector<uint8_t> out(65535);
        const cache::LookupResult hit = cache.lookup(question.cache_key(), parsed.query,
                                                     loop.now_ms(), {65535, 1232}, out, stale);
        EXPECT_NE(hit.length, 0u);
        const HostAnswer a =
            host_answer_from_dns(dns::Bytes(out.data(), hit.length), question.name.view(), qtype);
        return a.ttl;
    }

    TempFile hosts;
    ManualUpstream fake;
    cache::Cache cache;
    upstream::UpstreamRegistry registry;
    std::shared_ptr<const upstream::Routing> routing;
    nscache::testing::FakeClock clock;
    EventLoop loop;
    upstream::ResolverShared shared;
    WorkerCounters counters;
    RecordingHostSink sink;
    HostLookup lookup;
    std::optional<HostLookup> system_lookup;
};

HostQuery by_name(const std::string& name, int family = kAfInet, bool search = false) {
    HostQuery q;
    q.name = name;
    q.family = family;
    q.search = search;
    return q;
}

TEST(HostLookup, HostsFileAnswersAtOnceWithoutAskingUpstream) {
    HostHarness h("192.0.2.9 myhost.test myalias\n");
    std::optional<HostAnswer> a = h.lookup.start(by_name("myalias"), 1);
    ASSERT_TRUE(a);
    EXPECT_TRUE(a->found());
    EXPECT_TRUE(a->from_hosts_file);
    EXPECT_EQ(a->canonical, "myhost.test");
    ASSERT_EQ(a->ipv4.size(), 1u);
    EXPECT_EQ(a->ipv4[0][3], 9);
    h.settle();
    EXPECT_FALSE(h.fake.take_udp());
    EXPECT_TRUE(h.sink.answers.empty());
}

TEST(HostLookup, MissIsAnsweredLaterExactlyOnceThenHitAnswersAtOnceWithTheTtlCountedDown) {
    HostHarness h;
    EXPECT_FALSE(h.lookup.start(by_name("www.example.test"), 7));  // never from inside start()
    auto q = h.next_query();
    ASSERT_TRUE(q);
    EXPECT_EQ(HostHarness::qname_of(*q), "www.example.test.");
    EXPECT_TRUE(h.sink.answers.empty());
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 7)));
    ASSERT_TRUE(h.wait_for(7));
    h.settle();
    ASSERT_EQ(h.sink.answers[7].size(), 1u);
    const HostAnswer& later = h.sink.answers[7][0];
    EXPECT_TRUE(later.found());
    EXPECT_EQ(later.ttl, 300u);
    EXPECT_EQ(later.canonical, "www.example.test");
    ASSERT_EQ(later.ipv4.size(), 1u);
    EXPECT_EQ(later.ipv4[0][3], 7);

    // 100 s on: the cache answers at once, with the TTL a DNS client would get.
    h.clock.advance_ms(100'000);
    h.loop.run_once(0);
    std::optional<HostAnswer> hit = h.lookup.start(by_name("www.example.test"), 8);
    ASSERT_TRUE(hit);
    EXPECT_TRUE(hit->found());
    EXPECT_EQ(hit->ttl, 200u);
    EXPECT_EQ(hit->ttl, h.dns_ttl("www.example.test", dns::rtype::A, false));
    h.settle();
    EXPECT_FALSE(h.fake.take_udp());
    EXPECT_EQ(h.sink.answers.count(8), 0u);
}

TEST(HostLookup, UnspecAsksAAndAaaaAndCombinesThem) {
    HostHarness h;
    EXPECT_FALSE(h.lookup.start(by_name("dual.example.test", 0), 3));
    std::vector<ManualUpstream::Received> queries;
    for (int i = 0; i < 2; ++i) {
        auto q = h.next_query();
        ASSERT_TRUE(q);
        queries.push_back(*q);
    }
    std::vector<uint16_t> types;
    for (const auto& q : queries) {
        types.push_back(HostHarness::qtype_of(q));
        h.fake.reply_udp(q, HostHarness::qtype_of(q) == dns::rtype::A
                                ? answer_to(q.msg, 0, 1, a_record(300, 1))
                                : answer_to(q.msg, 0, 1, aaaa_record(120, 2)));
    }
    std::sort(types.begin(), types.end());
    EXPECT_EQ(types, (std::vector<uint16_t>{dns::rtype::A, dns::rtype::AAAA}));
    ASSERT_TRUE(h.wait_for(3));
    h.settle();
    ASSERT_EQ(h.sink.answers[3].size(), 1u);
    const HostAnswer& a = h.sink.answers[3][0];
    EXPECT_TRUE(a.found());
    EXPECT_EQ(a.ipv4.size(), 1u);
    ASSERT_EQ(a.ipv6.size(), 1u);
    EXPECT_EQ(a.ipv6[0][15], 2);
    EXPECT_EQ(a.ttl, 120u);

    // Both halves cached: AF_INET6 alone answers at once.
    std::optional<HostAnswer> v6 = h.lookup.start(by_name("dual.example.test", kAfInet6), 4);
    ASSERT_TRUE(v6);
    EXPECT_TRUE(v6->ipv4.empty());
    EXPECT_EQ(v6->ipv6.size(), 1u);
}

// The search list is read through glibc's res_ninit, which reads /etc/resolv.conf only, but
// takes LOCALDOMAIN and RES_OPTIONS from the environment over it (resolv.conf(5)).
// glibc keeps what it read first for the life of the process (until resolv.conf changes), so
// this is the one test that sets them; the others give their search list in the options.
struct ScopedEnv {
    std::string name;
    ScopedEnv(const char* n, const char* value) : name(n) { setenv(n, value, 1); }
    ~ScopedEnv() { unsetenv(name.c_str()); }
};

TEST(HostLookup, SearchListIsTriedInResSearchOrder) {
    const ScopedEnv domains("LOCALDOMAIN", "one.test two.test");
    const ScopedEnv options("RES_OPTIONS", "ndots:1");
    HostHarness h;
    h.use_system_resolv_conf();
    EXPECT_FALSE(h.active().start(by_name("www", kAfInet, true), 5));
    std::vector<std::string> asked;
    for (int i = 0; i < 2; ++i) {
        auto q = h.next_query();
        ASSERT_TRUE(q) << ::testing::PrintToString(asked) << " sink " << h.sink.answers.size();
        asked.push_back(HostHarness::qname_of(*q));
        const uint16_t nxdomain = static_cast<uint16_t>(dns::Rcode::NxDomain);
        h.fake.reply_udp(*q, asked.back() == "www.two.test."
                                 ? answer_to(q->msg, 0, 1, a_record(60, 2))
                                 : answer_to(q->msg, nxdomain, 0, {}));
    }
    // ndots:1 and no dot in the name: the search list first, in its order.
    EXPECT_EQ(asked, (std::vector<std::string>{"www.one.test.", "www.two.test."}));
    ASSERT_TRUE(h.wait_for(5));
    h.settle();
    EXPECT_FALSE(h.fake.take_udp());  // found: "www" itself is never asked
    ASSERT_EQ(h.sink.answers[5].size(), 1u);
    const HostAnswer& a = h.sink.answers[5][0];
    EXPECT_TRUE(a.found());
    EXPECT_EQ(a.answered_name, "www.two.test");
    ASSERT_EQ(a.ipv4.size(), 1u);
    EXPECT_EQ(a.ipv4[0][3], 2);
}

// Serve-stale applies to glibc as to DNS clients: past its TTL, an entry kept for serve-stale
// answers when the upstream fails, with the stale TTL a DNS client gets for it.
TEST(HostLookup, StaleEntryIsServedWhenTheUpstreamFails) {
    HostHarness h;
    EXPECT_FALSE(h.lookup.start(by_name("old.example.test"), 1));
    auto q = h.next_query();
    ASSERT_TRUE(q);
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 5)));
    ASSERT_TRUE(h.wait_for(1));

    h.clock.advance_ms(61'000);  // past the TTL, within stale-ttl
    h.loop.run_once(0);
    EXPECT_FALSE(h.lookup.start(by_name("old.example.test"), 2));  // stale: asked again
    q = h.next_query();
    ASSERT_TRUE(q);
    const uint16_t servfail = static_cast<uint16_t>(dns::Rcode::ServFail);
    h.fake.reply_udp(*q, answer_to(q->msg, servfail, 0, {}));
    ASSERT_TRUE(h.wait_for(2));
    h.settle();
    ASSERT_EQ(h.sink.answers[2].size(), 1u);
    const HostAnswer& stale = h.sink.answers[2][0];
    EXPECT_TRUE(stale.found());
    ASSERT_EQ(stale.ipv4.size(), 1u);
    EXPECT_EQ(stale.ipv4[0][3], 5);
    EXPECT_EQ(stale.ttl, cache::kStaleAnswerTtl);
    EXPECT_EQ(stale.ttl, h.dns_ttl("old.example.test", dns::rtype::A, true));
    EXPECT_EQ(h.counters.stale_served.load(), 1u);
}

// With serve-expired the stale entry answers at once, and the refresh goes upstream.
TEST(HostLookup, ServeExpiredAnswersStaleAtOnceAndRefreshes) {
    HostHarness h;
    h.lookup.apply(h.routing, upstream::ResolverOptions{}, HostCachePolicy{true, true});
    EXPECT_FALSE(h.lookup.start(by_name("exp.example.test"), 1));
    auto q = h.next_query();
    ASSERT_TRUE(q);
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 6)));
    ASSERT_TRUE(h.wait_for(1));

    h.clock.advance_ms(61'000);
    h.loop.run_once(0);
    std::optional<HostAnswer> stale = h.lookup.start(by_name("exp.example.test"), 2);
    ASSERT_TRUE(stale);
    EXPECT_TRUE(stale->found());
    EXPECT_EQ(stale->ttl, cache::kStaleAnswerTtl);
    q = h.next_query();  // the background refresh
    ASSERT_TRUE(q);
    EXPECT_EQ(HostHarness::qname_of(*q), "exp.example.test.");
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 8)));
    h.settle();
    EXPECT_EQ(h.sink.answers.count(2), 0u);
    std::optional<HostAnswer> fresh = h.lookup.start(by_name("exp.example.test"), 3);
    ASSERT_TRUE(fresh);
    ASSERT_EQ(fresh->ipv4.size(), 1u);
    EXPECT_EQ(fresh->ipv4[0][3], 8);
}

// RFC 9520 §3.2: a question that failed a moment ago fails at once, without an upstream query.
TEST(HostLookup, FailureCacheAnswersTryAgainAtOnce) {
    HostHarness h;
    upstream::Question question;
    dns::lower_name(dns::name_from_text("down.example.test")->view(), question.name);
    question.qtype = dns::rtype::A;
    question.qclass = dns::kClassIN;
    question.hash_with(h.cache);
    h.shared.failures.record(question.key_hash(), upstream::FailureReason::NoReachableAuthority,
                             h.loop.now_ms());
    std::optional<HostAnswer> a = h.lookup.start(by_name("down.example.test"), 1);
    ASSERT_TRUE(a);
    EXPECT_EQ(a->status, HostStatus::TryAgain);
    EXPECT_EQ(a->ttl, 0u);
    h.settle();
    EXPECT_FALSE(h.fake.take_udp());
    EXPECT_TRUE(h.sink.answers.empty());
}

// RFC 8767 §5's client response timer: an upstream silent for the stale-answer-timeout, and
// the stale entry answers; the upstream's later answer goes to the cache, not to the client.
TEST(HostLookup, StaleEntryIsServedWhenTheUpstreamIsSlow) {
    HostHarness h;
    EXPECT_FALSE(h.lookup.start(by_name("slow.example.test"), 1));
    auto q = h.next_query();
    ASSERT_TRUE(q);
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 5)));
    ASSERT_TRUE(h.wait_for(1));

    h.clock.advance_ms(61'000);
    h.loop.run_once(0);
    EXPECT_FALSE(h.lookup.start(by_name("slow.example.test"), 2));
    q = h.next_query();
    ASSERT_TRUE(q);
    h.settle();
    EXPECT_EQ(h.sink.answers.count(2), 0u);  // the timer has not run out yet
    h.clock.advance_ms(HostCachePolicy{}.stale_answer_timeout_ms);
    ASSERT_TRUE(h.wait_for(2));
    ASSERT_EQ(h.sink.answers[2].size(), 1u);
    EXPECT_TRUE(h.sink.answers[2][0].found());
    EXPECT_EQ(h.sink.answers[2][0].ttl, cache::kStaleAnswerTtl);

    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 9)));
    h.settle();
    EXPECT_EQ(h.sink.answers[2].size(), 1u);  // exactly once
    std::optional<HostAnswer> fresh = h.lookup.start(by_name("slow.example.test"), 3);
    ASSERT_TRUE(fresh);
    EXPECT_EQ(fresh->ipv4[0][3], 9);
}

// A question as the host lookup asks it (name lower-cased and hashed with the cache's seed).
upstream::Question host_question(HostHarness& h, const std::string& name, uint16_t qtype) {
    upstream::Question question;
    dns::lower_name(dns::name_from_text(name)->view(), question.name);
    question.qtype = qtype;
    question.qclass = dns::kClassIN;
    question.hash_with(h.cache);
    return question;
}

// An NXDOMAIN for (name, A) in the cache, stale by now (kept for serve-stale).
void cache_stale_nxdomain(HostHarness& h, const std::string& name) {
    auto nxdomain = cache::testing::prepare(
        cache::testing::negative_answer(name, dns::Rcode::NxDomain, 60, 60), cache::TtlPolicy{});
    ASSERT_TRUE(nxdomain);
    h.cache.insert(host_question(h, name, dns::rtype::A).cache_key(), *nxdomain, h.loop.now_ms());
    h.clock.advance_ms(61'000);
    h.loop.run_once(0);
}

// Review finding 1, the wrong answer: a DNS worker leads the upstream query for the first
// candidate, takes the host lookup's waiter and posts the answer; before the host thread
// drains it, its stale timer serves the stale NXDOMAIN and the search moves on. The posted
// answer is for the first candidate: it must not be read as the second one's.
TEST(HostLookup, LateAnswerForAnEarlierCandidateIsNotTakenForTheNextOne) {
    HostHarness h;
    h.use_search_list({"one.test", "two.test"});
    cache_stale_nxdomain(h, "x.one.test");
    const upstream::Question first = host_question(h, "x.one.test", dns::rtype::A);
    const upstream::Waiter dns_client{1, 77};  // another worker's client leads the query
    ASSERT_EQ(h.shared.inflight.join(first, &dns_client), upstream::JoinResult::Leader);

    EXPECT_FALSE(h.active().start(by_name("x", kAfInet, true), 5));
    EXPECT_FALSE(h.fake.take_udp());  // joined the worker's query

    // The worker's upstream answers: it takes the waiters and posts the host lookup's answer.
    auto late = cache::testing::prepare(cache::testing::positive_answer("x.one.test", {60}),
                                        cache::TtlPolicy{});
    ASSERT_TRUE(late);
    const auto shared_late = std::make_shared<const cache::PreparedAnswer>(*late);
    for (const upstream::Waiter& w : h.shared.inflight.finish(first)) {
        if (w.worker == 0)
            h.shared.queues[0]->push(w.cookie, upstream::ResolveOutcome{shared_late});
    }
    // The stale timer runs out in the same turn, before the queue is drained.
    h.clock.advance_ms(HostCachePolicy{}.stale_answer_timeout_ms);
    h.loop.run_once(0);  // no on_wake: timers only
    h.active().drain();

    auto q = h.next_query();
    ASSERT_TRUE(q);
    EXPECT_EQ(HostHarness::qname_of(*q), "x.two.test.");
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 2)));
    ASSERT_TRUE(h.wait_for(5));
    h.settle();
    ASSERT_EQ(h.sink.answers[5].size(), 1u);
    const HostAnswer& a = h.sink.answers[5][0];
    EXPECT_TRUE(a.found());
    EXPECT_EQ(a.answered_name, "x.two.test");
    ASSERT_EQ(a.ipv4.size(), 1u);
    EXPECT_EQ(a.ipv4[0][3], 2) << "x.one.test's late answer was read as x.two.test's";
}

// Review finding 1, the lookup never answered: a search list naming one domain twice asks one
// name twice, and the second round joins the upstream query the first is still waiting for.
// The first round's stale timer leaving that query must not take the second round's waiter.
TEST(HostLookup, SameCandidateTwiceFinishesExactlyOnce) {
    HostHarness h;
    h.use_search_list({"one.test", "one.test"});
    // Both rounds' timers run out within the upstream query's own timeout.
    constexpr uint32_t kTimeoutMs = 500;
    h.active().apply(h.routing, upstream::ResolverOptions{},
                     HostCachePolicy{.stale_answer_timeout_ms = kTimeoutMs});
    cache_stale_nxdomain(h, "x.one.test");

    EXPECT_FALSE(h.active().start(by_name("x", kAfInet, true), 5));
    auto q = h.next_query();
    ASSERT_TRUE(q);
    EXPECT_EQ(HostHarness::qname_of(*q), "x.one.test.");
    // The upstream is slow: the first round's stale NXDOMAIN answers it, and the second round
    // (x.one.test again) joins the query still in flight.
    h.clock.advance_ms(kTimeoutMs);
    h.loop.run_once(0, [&h] { h.active().drain(); });
    EXPECT_EQ(h.sink.answers.count(5), 0u);
    // The stale entry goes before the second round's timer: it waits for the upstream.
    h.cache.flush_name(host_question(h, "x.one.test", dns::rtype::A).name.view());
    h.clock.advance_ms(kTimeoutMs);
    h.loop.run_once(0, [&h] { h.active().drain(); });
    EXPECT_EQ(h.sink.answers.count(5), 0u);

    // The upstream query's retries (with their own IDs): the latest is the one answered.
    while (auto retry = h.fake.take_udp()) {
        EXPECT_EQ(HostHarness::qname_of(*retry), "x.one.test.");
        q = retry;
    }
    EXPECT_EQ(h.counters.coalesced.load(), 1u);  // the second round joined the first's query
    h.fake.reply_udp(*q, answer_to(q->msg, 0, 1, a_record(60, 3)));
    ASSERT_TRUE(h.wait_for(5)) << "the second round lost its waiter";
    h.settle();
    ASSERT_EQ(h.sink.answers[5].size(), 1u);
    const HostAnswer& a = h.sink.answers[5][0];
    EXPECT_TRUE(a.found());
    EXPECT_EQ(a.answered_name, "x.one.test");
    ASSERT_EQ(a.ipv4.size(), 1u);
    EXPECT_EQ(a.ipv4[0][3], 3);
}

}  // namespace
}  // namespace nscache::hostdb
