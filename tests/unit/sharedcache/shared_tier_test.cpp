// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/shared_tier.h"

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <optional>

#include "cache/cache_test_support.h"
#include "common/clock.h"
#include "fake_clock.h"
#include "fake_redis.h"
#include "sharedcache/cluster_slots.h"
#include "sharedcache/shared_value.h"

namespace nscache::sharedcache {
namespace {

using testing::FakeRedis;

struct Outcome {
    uint64_t token;
    std::shared_ptr<const cache::PreparedAnswer> answer;
};

struct RecordingSink final : LookupSink {
    std::vector<Outcome> outcomes;
    void shared_lookup_done(uint64_t token,
                            std::shared_ptr<const cache::PreparedAnswer> answer) override {
        outcomes.push_back({token, std::move(answer)});
    }
};

struct Key {
    dns::NameBuffer name;
    cache::CacheKey key;
    explicit Key(std::string_view text) {
        dns::lower_name(dns::name_from_text(text)->view(), name);
        key = cache::CacheKey{name.view(), dns::rtype::A, dns::kClassIN, 0};
    }
};

SharedCacheConfig standalone(const FakeRedis& redis, uint32_t timeout_ms = 100) {
    SharedCacheConfig c;
    c.redis = RedisEndpoint{redis.address, {}};
    c.timeout_ms = timeout_ms;
    return c;
}

struct Harness {
    explicit Harness(SharedCacheConfig c) : config(std::move(c)) {
        tier = std::make_unique<SharedTier>(loop, config, ttl, health, counters, sink);
    }

    // Turns the loop until `done`, or `turns` turns of 5 ms of the fake clock each (no real
    // waiting: the fake Redis's loopback bytes are readable when its send() returns).
    bool run_until(const std::function<bool()>& done, int turns = 400) {
        for (int i = 0; i < turns; ++i) {
            if (done()) return true;
            clock.advance_ms(5);
            loop.run_once(0);
        }
        return done();
    }

    // The next command `redis` receives while the loop turns.
    std::optional<FakeRedis::Command> next(FakeRedis& redis) {
        std::optional<FakeRedis::Command> c;
        run_until([&] { return (c = redis.take()).has_value(); });
        return c;
    }

    SharedCacheConfig config;
    cache::TtlPolicy ttl;
    nscache::testing::FakeClock clock;
    EventLoop loop{clock};
    TierHealth health;
    WorkerCounters counters;
    RecordingSink sink;
    std::unique_ptr<SharedTier> tier;
};

std::string value_for(const cache::CacheKey& key, uint32_t ttl, uint64_t written_ms) {
    auto a = cache::testing::prepare(cache::testing::positive_answer("www.example.test", {ttl}),
                                     cache::TtlPolicy{});
    const auto v = encode_value(key, *a, written_ms);
    return std::string(v.begin(), v.end());
}

TEST(SharedTier, LookupAnswersLaterNeverInsideTheCall) {
    FakeRedis redis;
    Harness h(standalone(redis));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 7, false));
    EXPECT_TRUE(h.sink.outcomes.empty());
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    ASSERT_EQ(get->args.size(), 4u);
    EXPECT_EQ(get->args[0], "GETRANGE");
    EXPECT_EQ(get->args[1], "nscache:1:www.example.test.:1:1:0");
    EXPECT_EQ(get->args[3], std::to_string(kMaxValueBytes));  // never more than that comes back
    redis.reply(*get, FakeRedis::bulk(value_for(www.key, 300, wall_ms() - 2'000)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
    ASSERT_EQ(h.sink.outcomes.size(), 1u);
    EXPECT_EQ(h.sink.outcomes[0].token, 7u);
    ASSERT_TRUE(h.sink.outcomes[0].answer);
    EXPECT_GE(h.sink.outcomes[0].answer->ttl, 297u);  // counted down since it was written
    EXPECT_LE(h.sink.outcomes[0].answer->ttl, 298u);
    EXPECT_EQ(h.counters.shared_hits.load(), 1u);
    EXPECT_EQ(h.tier->outstanding(), 0u);
}

TEST(SharedTier, AbsentOrInvalidValuesAreMisses) {
    FakeRedis redis;
    Harness h(standalone(redis));
    Key www("www.example.test");
    Key other("other.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    ASSERT_TRUE(h.tier->lookup(www.key, 3, false));
    redis.reply(*h.next(redis), FakeRedis::bulk(""));  // GETRANGE of a missing key
    redis.reply(*h.next(redis), FakeRedis::bulk(value_for(other.key, 300, wall_ms())));
    redis.reply(*h.next(redis), "-WRONGTYPE Operation against a key holding the wrong kind\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == 3; }));
    for (const Outcome& o : h.sink.outcomes) EXPECT_FALSE(o.answer);
    EXPECT_EQ(h.counters.shared_misses.load(), 1u);
    EXPECT_EQ(h.counters.shared_invalid.load(), 2u);
    EXPECT_EQ(h.health.state(), SharedTierState::Up);  // bad values are no fault of Redis
}

TEST(SharedTier, SilenceCostsTheTimeoutThenTheNodeIsDownUntilAProbeAnswers) {
    FakeRedis redis;
    Harness h(standalone(redis, 50));
    Key www("www.example.test");
    for (uint64_t token = 1; token <= 3; ++token) {
        const uint64_t asked = h.loop.now_ms();
        ASSERT_TRUE(h.tier->lookup(www.key, token, false));
        ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == token; }));
        EXPECT_GE(h.loop.now_ms() - asked, 50u);
        EXPECT_FALSE(h.sink.outcomes.back().answer);
    }
    EXPECT_EQ(h.counters.shared_timeouts.load(), 3u);
    EXPECT_EQ(h.health.state(), SharedTierState::Down);
    // Down: not asked at all, so a miss costs nothing.
    EXPECT_FALSE(h.tier->lookup(www.key, 4, false));
    EXPECT_EQ(h.counters.shared_skipped.load(), 1u);
    // The probe (within a second) on a fresh connection; its answer brings the node back.
    std::optional<FakeRedis::Command> ping;
    ASSERT_TRUE(h.run_until(
        [&] {
            while (auto c = redis.take()) {
                if (c->args[0] == "PING") ping = c;
            }
            return ping.has_value();
        },
        400));
    EXPECT_GE(redis.connections(), 2u);
    redis.reply(*ping, "+PONG\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.health.state() == SharedTierState::Up; }));
    EXPECT_TRUE(h.tier->lookup(www.key, 5, false));
}

// A reply that comes after the timeout would still be read, and every later reply behind it
// (an endless one kept the connection, and what hiredis had parsed of it, for good). The
// timed-out request's connection is dropped and the next lookup opens a fresh one.
TEST(SharedTier, ATimedOutRequestDropsItsConnection) {
    FakeRedis redis;
    Harness h(standalone(redis, 50));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == 1; }));
    EXPECT_EQ(h.counters.shared_timeouts.load(), 1u);
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    auto again = h.next(redis);
    ASSERT_TRUE(again);
    EXPECT_EQ(redis.connections(), 2u);
    EXPECT_NE(again->connection, get->connection);
    redis.reply(*get, FakeRedis::bulk(value_for(www.key, 300, wall_ms())));  // too late
    redis.reply(*again, FakeRedis::bulk(""));
    ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == 2; }));
    EXPECT_FALSE(h.sink.outcomes[1].answer);
    EXPECT_EQ(h.counters.shared_misses.load(), 1u);
    EXPECT_EQ(h.counters.shared_hits.load(), 0u);
}

// Dropping a timed-out request's connection fails every other request on it; those failures
// are nscache's own doing, not the node's. Counted as failures, one stall with two lookups
// behind it made three in a row and marked the node down (with the default 5 ms timeout, any
// hiccup took the tier down: misses upstream, probes, reconnect, AUTH again).
TEST(SharedTier, OneTimeoutWithOthersInFlightIsOneFailure) {
    FakeRedis redis;
    Harness h(standalone(redis, 50));
    Key www("www.example.test");
    for (uint64_t token = 1; token <= 3; ++token) {
        ASSERT_TRUE(h.tier->lookup(www.key, token, false));
        ASSERT_TRUE(h.next(redis));                               // sent; never answered
        for (int i = 0; i < 5 && h.sink.outcomes.empty(); ++i) {  // 10 ms on, within the timeout
            h.clock.advance_ms(2);
            h.loop.run_once(0);
        }
    }
    ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == 3; }));
    for (const Outcome& o : h.sink.outcomes) EXPECT_FALSE(o.answer);
    EXPECT_EQ(h.counters.shared_timeouts.load(), 1u);
    EXPECT_EQ(h.counters.shared_errors.load(), 0u);
    EXPECT_EQ(h.counters.shared_abandoned.load(), 2u);
    EXPECT_EQ(h.health.state(), SharedTierState::Up);
    // Still up: the next lookup is asked, on a fresh connection.
    ASSERT_TRUE(h.tier->lookup(www.key, 4, false));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    EXPECT_EQ(redis.connections(), 2u);
}

// A reply of a type the command never returns (GETRANGE answers a bulk string) is a server
// not speaking our protocol: the connection goes, not just the value.
TEST(SharedTier, AReplyOfTheWrongTypeDropsTheConnection) {
    FakeRedis redis;
    Harness h(standalone(redis));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    redis.reply(*get, "*3\r\n:1\r\n:2\r\n:3\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.sink.outcomes.size() == 1; }));
    EXPECT_FALSE(h.sink.outcomes[0].answer);
    EXPECT_EQ(h.counters.shared_errors.load(), 1u);
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    ASSERT_TRUE(h.next(redis));
    EXPECT_EQ(redis.connections(), 2u);
}

// hiredis 0.14 asserts on a reply no command asked for: one extra "+OK" from whatever listens
// at Redis's address used to abort the daemon. Now it only drops that connection.
TEST(SharedTier, ARepliesNobodyAskedForDropTheConnectionNotTheProcess) {
    FakeRedis redis;
    Harness h(standalone(redis));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    redis.reply(*get, FakeRedis::bulk("") + "+OK\r\n:1\r\n");
    ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
    EXPECT_FALSE(h.sink.outcomes[0].answer);
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    auto again = h.next(redis);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->args[0], "GETRANGE");
    EXPECT_EQ(redis.connections(), 2u);  // on a fresh connection
}

TEST(SharedTier, AtMaxInflightLookupsAndWritesAreNotSent) {
    FakeRedis redis;
    SharedCacheConfig config = standalone(redis);
    config.max_inflight = 2;
    Harness h(config);
    Key www("www.example.test");
    EXPECT_TRUE(h.tier->lookup(www.key, 1, false));
    EXPECT_TRUE(h.tier->lookup(www.key, 2, false));
    EXPECT_FALSE(h.tier->lookup(www.key, 3, false));
    auto a = cache::testing::prepare(cache::testing::positive_answer("www.example.test", {300}),
                                     cache::TtlPolicy{});
    h.tier->store(www.key, *a);
    EXPECT_EQ(h.counters.shared_skipped.load(), 1u);
    EXPECT_EQ(h.counters.shared_writes_dropped.load(), 1u);
}

TEST(SharedTier, StoreWritesTheValueWithItsTtlAsExpiry) {
    FakeRedis redis;
    Harness h(standalone(redis));
    Key www("www.example.test");
    auto a = cache::testing::prepare(cache::testing::positive_answer("www.example.test", {300}),
                                     cache::TtlPolicy{});
    h.tier->store(www.key, *a);
    auto set = h.next(redis);
    ASSERT_TRUE(set);
    ASSERT_EQ(set->args.size(), 5u);
    EXPECT_EQ(set->args[0], "SET");
    EXPECT_EQ(set->args[1], "nscache:1:www.example.test.:1:1:0");
    EXPECT_EQ(set->args[3], "PX");
    EXPECT_EQ(set->args[4], "300000");
    const std::vector<uint8_t> value(set->args[2].begin(), set->args[2].end());
    EXPECT_EQ(decode_value(value, www.key, cache::TtlPolicy{}, wall_ms(), false).verdict,
              ValueVerdict::Answer);
    redis.reply(*set, "+OK\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.tier->outstanding() == 0; }));
    EXPECT_EQ(h.counters.shared_writes.load(), 1u);

    // SERVFAIL and answers not to be cached are never written.
    cache::PreparedAnswer servfail = *a;
    servfail.kind = cache::AnswerKind::ServFail;
    h.tier->store(www.key, servfail);
    cache::PreparedAnswer uncacheable = *a;
    uncacheable.ttl = 0;
    h.tier->store(www.key, uncacheable);
    EXPECT_EQ(h.counters.shared_writes.load(), 1u);
}

TEST(SharedTier, WriteFalseReadsButNeverWrites) {
    FakeRedis redis;
    SharedCacheConfig config = standalone(redis);
    config.write = false;
    Harness h(config);
    Key www("www.example.test");
    auto a = cache::testing::prepare(cache::testing::positive_answer("www.example.test", {300}),
                                     cache::TtlPolicy{});
    h.tier->store(www.key, *a);
    EXPECT_EQ(h.tier->outstanding(), 0u);
    EXPECT_TRUE(h.tier->lookup(www.key, 1, false));
}

TEST(SharedTier, AuthGoesFirstOnEveryConnection) {
    FakeRedis redis;
    SharedCacheConfig config = standalone(redis);
    config.user = "dns";
    config.password = "s3cret";
    Harness h(config);
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    auto auth = h.next(redis);
    ASSERT_TRUE(auth);
    EXPECT_EQ(auth->args, (std::vector<std::string>{"AUTH", "dns", "s3cret"}));
    redis.reply(*auth, "+OK\r\n");
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    EXPECT_EQ(get->args[0], "GETRANGE");
}

TEST(SharedTier, ARefusedConnectionFailsAtOnceNotAtTheTimeout) {
    std::optional<SocketAddress> closed;
    {
        FakeRedis gone;
        closed = gone.address;
    }
    SharedCacheConfig config;
    config.redis = RedisEndpoint{*closed, {}};
    config.timeout_ms = 10'000;
    Harness h(config);
    Key www("www.example.test");
    // Refused on the spot or as the connect completes: each lookup is a miss well before its
    // 10 s timeout (or is not taken at all), and three in a row mark the node down.
    for (uint64_t token = 1; token <= 3; ++token) {
        if (!h.tier->lookup(www.key, token, false)) continue;
        ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
        EXPECT_FALSE(h.sink.outcomes.back().answer);
        h.sink.outcomes.clear();
    }
    EXPECT_EQ(h.health.state(), SharedTierState::Down);
    EXPECT_FALSE(h.tier->lookup(www.key, 4, false));
    EXPECT_EQ(h.counters.shared_timeouts.load(), 0u);
    EXPECT_EQ(h.counters.shared_errors.load(), 3u);
}

SharedCacheConfig cluster_of(const FakeRedis& seed) {
    SharedCacheConfig c;
    c.redis_cluster = {seed.address};
    c.timeout_ms = 200;
    return c;
}

std::string redirect(const char* kind, const cache::CacheKey& key, const FakeRedis& to) {
    const uint16_t slot = key_slot(shared_key("nscache:", key));
    return std::string("-") + kind + " " + std::to_string(slot) + " " + to.address.to_string() +
           "\r\n";
}

TEST(SharedTierCluster, MovedIsFollowedAndRemembered) {
    FakeRedis a, b;
    Harness h(cluster_of(a));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    auto first = h.next(a);
    ASSERT_TRUE(first);
    a.reply(*first, redirect("MOVED", www.key, b));
    auto second = h.next(b);
    ASSERT_TRUE(second);
    EXPECT_EQ(second->args[0], "GETRANGE");
    b.reply(*second, FakeRedis::bulk(value_for(www.key, 300, wall_ms())));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
    EXPECT_TRUE(h.sink.outcomes[0].answer);
    EXPECT_EQ(h.counters.shared_redirects.load(), 1u);
    // The slot map is asked for (at most once a second); the slot's new home is used next.
    auto slots = h.next(a);
    ASSERT_TRUE(slots);
    EXPECT_EQ(slots->args, (std::vector<std::string>{"CLUSTER", "SLOTS"}));
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    auto third = h.next(b);
    ASSERT_TRUE(third);
    EXPECT_EQ(third->args[0], "GETRANGE");
}

TEST(SharedTierCluster, AskSendsAskingFirstAndMovesNothing) {
    FakeRedis a, b;
    Harness h(cluster_of(a));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    a.reply(*h.next(a), redirect("ASK", www.key, b));
    auto asking = h.next(b);
    ASSERT_TRUE(asking);
    EXPECT_EQ(asking->args, std::vector<std::string>{"ASKING"});
    b.reply(*asking, "+OK\r\n");
    auto get = h.next(b);
    ASSERT_TRUE(get);
    EXPECT_EQ(get->args[0], "GETRANGE");
    b.reply(*get, FakeRedis::bulk(""));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
    // ASK is for this once: the next lookup goes to the slot's owner again.
    ASSERT_TRUE(h.tier->lookup(www.key, 2, false));
    auto again = h.next(a);
    ASSERT_TRUE(again);
    EXPECT_EQ(again->args[0], "GETRANGE");
}

TEST(SharedTierCluster, RedirectionsAreBoundedPerRequest) {
    FakeRedis a, b;
    Harness h(cluster_of(a));
    Key www("www.example.test");
    ASSERT_TRUE(h.tier->lookup(www.key, 1, false));
    a.reply(*h.next(a), redirect("ASK", www.key, b));
    // b and a send each other back and forth: the request ends as a miss, not a loop.
    for (int i = 0; i < 8 && h.sink.outcomes.empty(); ++i) {
        FakeRedis* from = nullptr;
        std::optional<FakeRedis::Command> c;
        h.run_until([&] {
            if ((c = b.take())) from = &b;
            if (!c && (c = a.take())) from = &a;
            return c.has_value() || !h.sink.outcomes.empty();
        });
        if (!c) break;
        if (c->args[0] == "ASKING") {
            from->reply(*c, "+OK\r\n");
        } else if (c->args[0] == "CLUSTER") {
            from->reply(*c, "*0\r\n");
        } else {
            from->reply(*c, redirect("ASK", www.key, from == &a ? b : a));
        }
    }
    ASSERT_TRUE(h.run_until([&] { return !h.sink.outcomes.empty(); }));
    EXPECT_FALSE(h.sink.outcomes[0].answer);
    EXPECT_LE(h.counters.shared_redirects.load(), 3u);
}

}  // namespace
}  // namespace nscache::sharedcache
