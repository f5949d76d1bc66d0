// SPDX-License-Identifier: BSD-3-Clause
#include "cache/name_set.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "dns/name.h"

namespace nscache::cache {
namespace {

dns::NameBuffer wire(const char* text) {
    return *dns::name_from_text(text);
}

TEST(NameSet, NamesCoverThemselvesAndSubtreesEverythingBelow) {
    NameSet set;
    EXPECT_TRUE(set.empty());
    EXPECT_FALSE(set.covers(wire("localhost").view()));
    set.add_name(wire("printer.lan").view());
    set.add_subtree(wire("localhost").view());
    set.add_subtree(wire("10.in-addr.arpa").view());
    EXPECT_FALSE(set.empty());
    EXPECT_TRUE(set.covers(wire("printer.lan").view()));
    EXPECT_FALSE(set.covers(wire("a.printer.lan").view()));
    EXPECT_FALSE(set.covers(wire("lan").view()));
    EXPECT_TRUE(set.covers(wire("localhost").view()));
    EXPECT_TRUE(set.covers(wire("x.y.localhost").view()));
    EXPECT_FALSE(set.covers(wire("notlocalhost").view()));
    EXPECT_TRUE(set.covers(wire("1.2.3.10.in-addr.arpa").view()));
    EXPECT_FALSE(set.covers(wire("in-addr.arpa").view()));
    EXPECT_FALSE(set.covers(wire(".").view()));
}

// A [[forward]] domain under a local zone (cluster.local under local) goes upstream: its
// names were left out of every cache file loaded and flushed at every reload.
TEST(NameSet, ExceptionsCarveOutOfASubtreeAndTheLongestSuffixDecides) {
    NameSet set;
    set.add_subtree(wire("local").view());
    set.add_exception(wire("cluster.local").view());
    set.add_subtree(wire("private.cluster.local").view());
    set.add_name(wire("printer.cluster.local").view());
    EXPECT_TRUE(set.covers(wire("local").view()));
    EXPECT_TRUE(set.covers(wire("x.local").view()));
    EXPECT_FALSE(set.covers(wire("cluster.local").view()));
    EXPECT_FALSE(set.covers(wire("svc.default.cluster.local").view()));
    EXPECT_TRUE(set.covers(wire("a.private.cluster.local").view()));
    EXPECT_TRUE(set.covers(wire("printer.cluster.local").view()));
    EXPECT_FALSE(set.covers(wire("www.example.test").view()));

    NameSet everything;
    everything.add_subtree(wire(".").view());
    everything.add_exception(wire("example.test").view());
    EXPECT_TRUE(everything.covers(wire("www.other.test").view()));
    EXPECT_FALSE(everything.covers(wire("www.example.test").view()));
    EXPECT_TRUE(everything.covers(wire(".").view()));
}

TEST(NameSet, AMalformedNameIsNotCoveredAndNotReadPastItsEnd) {
    NameSet set;
    set.add_subtree(wire("localhost").view());
    // A label that claims more bytes than there are, and no root label.
    const std::vector<uint8_t> broken = {3, 'a', 'b', 'c', 40, 'l', 'o'};
    EXPECT_FALSE(set.covers(dns::Bytes(broken)));
    EXPECT_FALSE(set.covers(dns::Bytes()));
}

}  // namespace
}  // namespace nscache::cache
