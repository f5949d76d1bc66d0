// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/inflight.h"

#include <gtest/gtest.h>

#include "common/hash.h"

namespace nscache::upstream {
namespace {

// A question as the Resolver hands it on: name hashed (here with a fixed seed).
Question q(std::string_view name) {
    Question question;
    dns::lower_name(dns::name_from_text(name)->view(), question.name);
    question.qtype = dns::rtype::A;
    question.qclass = dns::kClassIN;
    question.name_hash = seeded_hash(42, question.name.bytes, question.name.length);
    return question;
}

TEST(InflightTable, FirstLeadsOthersJoinFinishHandsAllBack) {
    InflightTable table;
    Waiter a{0, 1}, b{1, 2}, c{0, 3};
    EXPECT_EQ(table.join(q("k.test"), &a), JoinResult::Leader);
    EXPECT_EQ(table.join(q("k.test"), &b), JoinResult::Joined);
    EXPECT_EQ(table.join(q("k.test"), &c), JoinResult::Joined);
    EXPECT_EQ(table.join(q("other.test"), nullptr), JoinResult::Leader);
    table.leave(q("k.test"), c);
    auto waiters = table.finish(q("k.test"));
    ASSERT_EQ(waiters.size(), 2u);
    EXPECT_EQ(waiters[0].cookie, 1u);
    EXPECT_EQ(waiters[1].cookie, 2u);
    EXPECT_TRUE(table.finish(q("k.test")).empty());
    EXPECT_EQ(table.join(q("k.test"), &a),
              JoinResult::Leader);  // finished: a new query leads again
}

TEST(InflightTable, OtherTypesAndFlagsOfOneNameAreOtherQuestions) {
    InflightTable table;
    Waiter a{0, 1};
    Question aaaa = q("k.test");
    aaaa.qtype = dns::rtype::AAAA;
    Question with_do = q("k.test");
    with_do.do_bit = true;
    EXPECT_EQ(table.join(q("k.test"), &a), JoinResult::Leader);
    EXPECT_EQ(table.join(aaaa, &a), JoinResult::Leader);
    EXPECT_EQ(table.join(with_do, &a), JoinResult::Leader);
    EXPECT_EQ(table.join(q("K.TEST"), &a), JoinResult::Joined);  // lower-cased alike
}

TEST(InflightTable, BoundsWaitersPerQuery) {
    InflightTable table;
    Waiter w{0, 0};
    ASSERT_EQ(table.join(q("k.test"), &w), JoinResult::Leader);
    for (size_t i = 1; i < InflightTable::kMaxWaitersPerQuery; ++i) {
        w.cookie = i;
        ASSERT_EQ(table.join(q("k.test"), &w), JoinResult::Joined);
    }
    EXPECT_EQ(table.join(q("k.test"), &w), JoinResult::Full);
}

// leave() takes back one join: a waiter joined twice under one question (the same worker
// and cookie) still waits once after one leave.
TEST(InflightTable, LeaveRemovesOneWaiter) {
    InflightTable table;
    Waiter a{0, 1}, b{1, 2};
    EXPECT_EQ(table.join(q("k.test"), &a), JoinResult::Leader);
    EXPECT_EQ(table.join(q("k.test"), &b), JoinResult::Joined);
    EXPECT_EQ(table.join(q("k.test"), &a), JoinResult::Joined);
    table.leave(q("k.test"), a);
    table.leave(q("none.test"), a);  // nothing in flight: nothing to do
    auto waiters = table.finish(q("k.test"));
    ASSERT_EQ(waiters.size(), 2u);
    EXPECT_EQ(waiters[0].cookie + waiters[1].cookie, 3u);
}

}  // namespace
}  // namespace nscache::upstream
