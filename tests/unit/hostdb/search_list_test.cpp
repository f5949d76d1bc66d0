// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/search_list.h"

#include <gtest/gtest.h>

namespace nscache::hostdb {
namespace {

// The names a plan asks when every one answers `outcome`, and the plan's result.
std::vector<std::string> tries(SearchPlan plan, SearchOutcome outcome, SearchOutcome* result) {
    std::vector<std::string> names;
    while (auto n = plan.next()) {
        names.push_back(*n);
        plan.report(outcome);
    }
    *result = plan.result();
    return names;
}

SearchConfig config(unsigned ndots) {
    SearchConfig c;
    c.ndots = ndots;
    c.domains = {"example.test", "sub.example.test"};
    return c;
}

TEST(SearchPlan, ShortNamesTryTheSearchListFirst) {
    SearchOutcome r;
    EXPECT_EQ(tries(SearchPlan(config(1), "www"), SearchOutcome::NotFound, &r),
              (std::vector<std::string>{"www.example.test", "www.sub.example.test", "www"}));
    EXPECT_EQ(r, SearchOutcome::NotFound);
}

TEST(SearchPlan, NamesWithEnoughDotsTryThemselvesFirst) {
    SearchOutcome r;
    EXPECT_EQ(tries(SearchPlan(config(1), "a.b"), SearchOutcome::NotFound, &r),
              (std::vector<std::string>{"a.b", "a.b.example.test", "a.b.sub.example.test"}));
    EXPECT_EQ(tries(SearchPlan(config(1), "a.b."), SearchOutcome::NotFound, &r),
              (std::vector<std::string>{"a.b"}));
}

TEST(SearchPlan, FoundAndTimeoutsStopServfailGoesOn) {
    SearchPlan p(config(1), "www");
    EXPECT_EQ(*p.next(), "www.example.test");
    p.report(SearchOutcome::ServFail);
    EXPECT_EQ(*p.next(), "www.sub.example.test");
    p.report(SearchOutcome::Found);
    EXPECT_FALSE(p.next());
    EXPECT_EQ(p.result(), SearchOutcome::Found);

    SearchOutcome r;
    EXPECT_EQ(tries(SearchPlan(config(1), "www"), SearchOutcome::Failed, &r).size(), 1u);
    EXPECT_EQ(r, SearchOutcome::Failed);
}

TEST(SearchPlan, NodataEarlierInTheListIsTheOutcome) {
    SearchPlan p(config(1), "www");
    p.next();
    p.report(SearchOutcome::NoData);
    p.next();
    p.report(SearchOutcome::NotFound);
    p.next();
    p.report(SearchOutcome::NotFound);
    EXPECT_FALSE(p.next());
    EXPECT_EQ(p.result(), SearchOutcome::NoData);
}

TEST(SearchPlan, SingleAsksOnlyTheName) {
    SearchOutcome r;
    EXPECT_EQ(tries(SearchPlan::single("www"), SearchOutcome::NotFound, &r),
              (std::vector<std::string>{"www"}));
}

}  // namespace
}  // namespace nscache::hostdb
