// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/resolver.h"

#include <gtest/gtest.h>

#include "upstream_test_support.h"

namespace nscache::upstream {
namespace {

using testing::a_record;
using testing::answer_to;
using testing::ResolverHarness;

TEST(Resolver, AnswerIsDeliveredLaterNeverInsideResolve) {
    ResolverHarness h;
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("www.example.test"), 42));
    EXPECT_TRUE(h.sink.deliveries.empty());
    EXPECT_EQ(h.counters.upstream_queries.load(), 1u) << h.counters.upstream_errors.load();
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 7)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_EQ(h.sink.deliveries.size(), 1u);
    EXPECT_EQ(h.sink.deliveries[0].cookie, 42u);
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ancount, 1);
    EXPECT_EQ(h.cache.counters().entries, 1u);
    EXPECT_EQ(h.resolver.outstanding(), 0u);
}

TEST(Resolver, IdenticalQuestionsShareOneUpstreamQuery) {
    ResolverHarness h;
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("www.example.test"), 1));
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("WWW.example.test"), 2));
    EXPECT_EQ(h.resolver.outstanding(), 1u);
    EXPECT_EQ(h.counters.coalesced.load(), 1u);
}

// Over the limit the resolver used to answer SERVFAIL synchronously from inside resolve(),
// which re-entered the TCP connection that asked. Now it says no, and delivers nothing.
TEST(Resolver, OverTheLimitSaysNoAndDeliversNothing) {
    ResolverOptions options;
    options.max_outstanding = 1;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("a.example.test"), 1));
    EXPECT_FALSE(h.resolver.resolve(ResolverHarness::question("b.example.test"), 2));
    EXPECT_TRUE(h.sink.deliveries.empty());
    EXPECT_EQ(h.counters.overload_servfail.load(), 1u);
    h.resolver.refresh(ResolverHarness::question("c.example.test"));  // also over: dropped
    EXPECT_EQ(h.resolver.outstanding(), 1u);
    // The refused question is not left "in flight": once there is room it goes out.
    // a.example.test times out (2 s deadline) and leaves room.
    ASSERT_TRUE(h.run_until([&] { return h.resolver.outstanding() == 0; }, 1000));
    EXPECT_TRUE(h.resolver.resolve(ResolverHarness::question("b.example.test"), 3));
}

// A reload publishes its routing (routing_in_force) and flushes what moved before every thread
// has switched to it. An answer, or a failure, that comes back under the old routing after
// that must be relayed only: cached, it would undo the flush (a name just added to /etc/hosts
// hidden behind the upstream's answer for its TTL, a failure blocking the new route).
TEST(Resolver, AnswersAndFailuresUnderARoutingNoLongerInForceAreRelayedNotKept) {
    ResolverHarness h;
    h.shared.routing_in_force.store(h.routing.get());
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("www.example.test"), 1));
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("silent.example.test"), 2));
    const auto reloaded = h.make_routing();  // this thread has not adopted it yet
    h.shared.routing_in_force.store(reloaded.get());

    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] {
        while ((q = h.fake().take_udp()).has_value()) {
            if (q->msg.size() > 12 && q->msg[12] == 3) return true;  // "www"
        }
        return false;
    }));
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 7)));
    ASSERT_TRUE(h.run_until([&] { return h.sink.deliveries.size() == 2; }, 1000));
    for (const auto& d : h.sink.deliveries) {
        EXPECT_EQ(d.outcome.answer != nullptr, d.cookie == 1u) << d.cookie;
    }
    EXPECT_EQ(h.cache.counters().entries, 0u);
    EXPECT_FALSE(h.resolver.failing(ResolverHarness::question("silent.example.test"), nullptr));
}

}  // namespace
}  // namespace nscache::upstream
