// SPDX-License-Identifier: BSD-3-Clause
#include "cache/domain_ttl_caps.h"

#include <gtest/gtest.h>

#include "dns/name.h"

namespace nscache::cache {
namespace {

const DomainTtlCaps::Caps* find(const DomainTtlCaps& caps, const char* name) {
    return caps.find(dns::name_from_text(name)->view());
}

TEST(DomainTtlCaps, LongestDomainWinsAndTheRootCoversTheRest) {
    DomainTtlCaps caps;
    EXPECT_TRUE(caps.empty());
    EXPECT_EQ(find(caps, "a.cluster.local"), nullptr);
    caps.add(dns::name_from_text("cluster.local")->view(), {.max_ttl = 30});
    caps.add(dns::name_from_text("fast.cluster.local")->view(), {});
    EXPECT_FALSE(caps.empty());
    ASSERT_NE(find(caps, "cluster.local"), nullptr);
    EXPECT_EQ(find(caps, "cluster.local")->max_ttl, 30u);
    EXPECT_EQ(find(caps, "x.svc.cluster.local")->max_ttl, 30u);
    EXPECT_EQ(find(caps, "a.fast.cluster.local")->max_ttl, DomainTtlCaps::kNoCap);
    EXPECT_EQ(find(caps, "other.local"), nullptr);
    EXPECT_EQ(find(caps, "www.example.test"), nullptr);
    caps.add(dns::name_from_text(".")->view(), {.negative_max_ttl = 5});
    EXPECT_EQ(find(caps, "www.example.test")->negative_max_ttl, 5u);
    EXPECT_EQ(find(caps, "x.cluster.local")->negative_max_ttl, DomainTtlCaps::kNoCap);
}

TEST(DomainTtlCaps, DomainsWithoutCapsLeaveTheTableEmpty) {
    DomainTtlCaps caps;
    caps.add(dns::name_from_text("cluster.local")->view(), {});
    EXPECT_TRUE(caps.empty());
}

TEST(DomainTtlCaps, CappedPolicyTakesTheSmallerAndMinTtlStaysUnderTheCap) {
    const TtlPolicy policy{.min_ttl = 60, .max_ttl = 86400, .negative_max_ttl = 20};
    const TtlPolicy p = DomainTtlCaps::capped(policy, {.max_ttl = 30, .negative_max_ttl = 100});
    EXPECT_EQ(p.max_ttl, 30u);
    EXPECT_EQ(p.negative_max_ttl, 20u);
    EXPECT_EQ(p.min_ttl, 30u);
}

}  // namespace
}  // namespace nscache::cache
