// SPDX-License-Identifier: BSD-3-Clause
// The Resolver with a shared tier: the leader of a miss asks Redis first; a hit is answered,
// cached and never sent upstream; a miss goes upstream and its answer is written back.
#include <gtest/gtest.h>

#include "cache/cache_test_support.h"
#include "common/clock.h"
#include "sharedcache/fake_redis.h"
#include "sharedcache/shared_value.h"
#include "upstream/resolver.h"
#include "upstream_test_support.h"

namespace nscache::upstream {
namespace {

using sharedcache::testing::FakeRedis;
using testing::a_record;
using testing::answer_to;
using testing::ResolverHarness;

ResolverOptions with_tier(const FakeRedis& redis) {
    ResolverOptions o;
    o.shared_cache.redis = RedisEndpoint{redis.address, {}};
    o.shared_cache.timeout_ms = 500;
    return o;
}

std::optional<FakeRedis::Command> next(ResolverHarness& h, FakeRedis& redis) {
    std::optional<FakeRedis::Command> c;
    h.run_until([&] { return (c = redis.take()).has_value(); });
    return c;
}

std::string stored_value(const Question& q, uint32_t ttl, uint64_t age_ms = 5'000) {
    auto a = cache::testing::prepare(cache::testing::positive_answer("www.example.test", {ttl}),
                                     cache::TtlPolicy{});
    const auto v = sharedcache::encode_value(q.cache_key(), *a, wall_ms() - age_ms);
    return std::string(v.begin(), v.end());
}

TEST(ResolverSharedCache, AHitIsAnsweredAndCachedWithNoUpstreamQuery) {
    FakeRedis redis;
    ResolverHarness h(with_tier(redis));
    const Question q = ResolverHarness::question("www.example.test");
    ASSERT_TRUE(h.resolver.resolve(q, 1));
    ASSERT_TRUE(h.resolver.resolve(q, 2));  // joins the first: one lookup for both
    EXPECT_TRUE(h.sink.deliveries.empty());
    auto get = next(h, redis);
    ASSERT_TRUE(get);
    EXPECT_EQ(get->args[0], "GETRANGE");
    redis.reply(*get, FakeRedis::bulk(stored_value(q, 300)));
    ASSERT_TRUE(h.run_until([&] { return h.sink.deliveries.size() == 2; }));
    for (const auto& d : h.sink.deliveries) {
        ASSERT_TRUE(d.outcome.answer);
        EXPECT_LE(d.outcome.answer->ttl, 295u);  // another host's answer, 5 s old
    }
    EXPECT_EQ(h.counters.upstream_queries.load(), 0u);
    EXPECT_FALSE(h.fake().take_udp());
    EXPECT_EQ(h.cache.counters().entries, 1u);
    EXPECT_FALSE(redis.take());  // not written back
}

TEST(ResolverSharedCache, AMissGoesUpstreamAndTheAnswerIsWrittenBack) {
    FakeRedis redis;
    ResolverHarness h(with_tier(redis));
    const Question q = ResolverHarness::question("www.example.test");
    ASSERT_TRUE(h.resolver.resolve(q, 1));
    auto get = next(h, redis);
    ASSERT_TRUE(get);
    EXPECT_EQ(h.counters.upstream_queries.load(), 0u);  // Redis first, upstream after
    redis.reply(*get, FakeRedis::bulk(""));
    std::optional<testing::ManualUpstream::Received> sent;
    ASSERT_TRUE(h.run_until([&] { return (sent = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*sent, answer_to(sent->msg, 0, 1, a_record(120, 9)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    auto set = next(h, redis);
    ASSERT_TRUE(set);
    EXPECT_EQ(set->args[0], "SET");
    EXPECT_EQ(set->args[4], "120000");
    EXPECT_EQ(h.counters.shared_writes.load(), 1u);
}

TEST(ResolverSharedCache, SilentRedisCostsOnlyItsTimeout) {
    FakeRedis redis;
    ResolverOptions options = with_tier(redis);
    options.shared_cache.timeout_ms = 30;
    ResolverHarness h(options);
    const Question q = ResolverHarness::question("www.example.test");
    ASSERT_TRUE(h.resolver.resolve(q, 1));
    std::optional<testing::ManualUpstream::Received> sent;
    ASSERT_TRUE(h.run_until([&] { return (sent = h.fake().take_udp()).has_value(); }));
    EXPECT_EQ(h.counters.shared_timeouts.load(), 1u);
    h.fake().reply_udp(*sent, answer_to(sent->msg, 0, 1, a_record(120, 9)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    EXPECT_TRUE(h.sink.deliveries[0].outcome.answer);
}

TEST(ResolverSharedCache, ARefreshTakesOnlyAFresherValue) {
    FakeRedis redis;
    ResolverHarness h(with_tier(redis));
    const Question q = ResolverHarness::question("www.example.test");
    h.resolver.refresh(q);
    auto get = next(h, redis);
    ASSERT_TRUE(get);
    // 95 s into a 100 s lifetime: as stale as the entry being refreshed, so upstream is asked.
    redis.reply(*get, FakeRedis::bulk(stored_value(q, 100, 95'000)));
    std::optional<testing::ManualUpstream::Received> sent;
    ASSERT_TRUE(h.run_until([&] { return (sent = h.fake().take_udp()).has_value(); }));
    EXPECT_EQ(h.counters.shared_misses.load(), 1u);
}

}  // namespace
}  // namespace nscache::upstream
