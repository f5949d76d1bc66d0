// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/routing.h"

#include <gtest/gtest.h>

#include "dns/name.h"

namespace nscache::upstream {
namespace {

dns::NameBuffer wire(std::string_view text) {
    dns::NameBuffer lower;
    dns::lower_name(dns::name_from_text(text)->view(), lower);
    return lower;
}

Config base() {
    Config c;
    c.upstreams = {*parse_socket_address("192.0.2.1:53", std::nullopt)};
    return c;
}

ForwardZone zone(std::vector<std::string> domains, const char* upstream, bool cache = true) {
    ForwardZone z;
    z.domains = std::move(domains);
    z.upstreams = {*parse_socket_address(upstream, 53)};
    z.cache = cache;
    return z;
}

TEST(Routing, LongestSuffixWinsAndTheDefaultTakesTheRest) {
    Config c = base();
    c.forwards = {zone({"corp.example."}, "10.0.0.1"), zone({"deep.corp.example."}, "10.0.0.2")};
    UpstreamRegistry known;
    auto r = Routing::build(c, known);
    auto at = [&](std::string_view name) {
        const Route route = r->route(wire(name).view());
        EXPECT_EQ(route.kind, RouteKind::Forward) << name;
        return route.rule->upstreams->at(0).address.to_string();
    };
    EXPECT_EQ(at("www.corp.example"), "10.0.0.1:53");
    EXPECT_EQ(at("corp.example"), "10.0.0.1:53");
    EXPECT_EQ(at("x.deep.corp.example"), "10.0.0.2:53");
    EXPECT_EQ(at("notcorp.example"), "192.0.2.1:53");  // a label boundary, not a string suffix
    EXPECT_EQ(at("example.org"), "192.0.2.1:53");
}

TEST(Routing, BuiltInZonesYieldToAnExplicitForwardOfTheSameName) {
    Config c = base();
    c.forwards = {zone({"10.in-addr.arpa."}, "10.0.0.1")};
    UpstreamRegistry known;
    auto r = Routing::build(c, known);
    EXPECT_EQ(r->route(wire("4.3.2.10.in-addr.arpa").view()).kind, RouteKind::Forward);
    EXPECT_EQ(r->route(wire("1.1.168.192.in-addr.arpa").view()).kind, RouteKind::LocalNxdomain);
    EXPECT_EQ(r->route(wire("x.localhost").view()).kind, RouteKind::Localhost);
    const Route apex = r->route(wire("168.192.in-addr.arpa").view());
    EXPECT_EQ(apex.kind, RouteKind::LocalNxdomain);
    EXPECT_EQ(apex.zone_offset, 0u);
    c.forward_private_zones = true;
    auto open = Routing::build(c, known);
    EXPECT_EQ(open->route(wire("1.1.168.192.in-addr.arpa").view()).kind, RouteKind::Forward);
    EXPECT_EQ(open->route(wire("localhost").view()).kind, RouteKind::Localhost);  // always
}

TEST(Routing, UpstreamsKeepTheirHealthAcrossRebuildsAndDuplicatesCountOnce) {
    Config c = base();
    c.upstreams.push_back(*parse_socket_address("192.0.2.1:53", std::nullopt));  // again
    UpstreamRegistry known;
    auto first = Routing::build(c, known);
    EXPECT_EQ(first->rules()[0].upstreams->size(), 1u);
    first->rules()[0].upstreams->at(0).srtt_us.store(1234);
    auto second = Routing::build(c, known);
    EXPECT_EQ(second->rules()[0].upstreams->at(0).srtt_us.load(), 1234u);
}

TEST(Routing, MovedDomainsNameWhatARebuildSendsElsewhere) {
    Config c = base();
    UpstreamRegistry known;
    auto before = Routing::build(c, known);
    c.forwards = {zone({"corp.example."}, "10.0.0.1")};
    c.forward_private_zones = true;
    auto after = Routing::build(c, known);
    const auto moved = after->moved_domains(*before);
    auto has = [&](std::string_view name) {
        const dns::NameBuffer w = wire(name);
        const std::string key(reinterpret_cast<const char*>(w.bytes), w.length);
        return std::find(moved.begin(), moved.end(), key) != moved.end();
    };
    EXPECT_TRUE(has("corp.example"));
    EXPECT_TRUE(has("10.in-addr.arpa"));  // no longer kept local
    EXPECT_FALSE(has("localhost"));
    EXPECT_TRUE(after->moved_domains(*after).empty());
}

TEST(Routing, LocalNamesAndTheirReverseNames) {
    Config c = base();
    std::string error;
    c.local_records = {*parse_local_record("printer.lan A 192.168.1.9", error),
                       *parse_local_record("scanner.lan A 192.168.1.9", error)};
    UpstreamRegistry known;
    auto r = Routing::build(c, known, {{"nas.lan.", dns::rtype::AAAA, "fd00::1"}});
    const Route printer = r->route(wire("PRINTER.lan").view());
    ASSERT_EQ(printer.kind, RouteKind::LocalName);
    ASSERT_EQ(printer.records->size(), 1u);
    const Route ptr = r->route(wire("9.1.168.192.in-addr.arpa").view());
    ASSERT_EQ(ptr.kind, RouteKind::LocalName);  // a local name beats the private zone
    ASSERT_EQ(ptr.records->size(), 1u);         // the first name claims the address
    EXPECT_EQ(dns::name_to_text(dns::Bytes(ptr.records->at(0).rdata)), "printer.lan.");
    EXPECT_EQ(r->route(wire("nas.lan").view()).kind, RouteKind::LocalName);
}

// A rule's transport and TTL caps reach its set and rule; a lower cap moves its domains (what
// they cached under the old cap is flushed on reload), a transport change alone does not.
TEST(Routing, RuleTransportAndTtlCaps) {
    Config c = base();
    ForwardZone cluster = zone({"cluster.local."}, "10.96.0.10");
    cluster.transport = ForwardTransport::Tcp;
    cluster.max_ttl = 30;
    cluster.negative_max_ttl = 5;
    c.forwards = {cluster};
    UpstreamRegistry known;
    auto r = Routing::build(c, known);
    const Route route = r->route(wire("kube-dns.kube-system.svc.cluster.local").view());
    ASSERT_EQ(route.kind, RouteKind::Forward);
    EXPECT_TRUE(route.rule->upstreams->tcp_only());
    EXPECT_EQ(route.rule->max_ttl, 30u);
    EXPECT_EQ(route.rule->negative_max_ttl, 5u);
    const Route other = r->route(wire("example.com").view());
    EXPECT_FALSE(other.rule->upstreams->tcp_only());
    EXPECT_EQ(other.rule->max_ttl, kNoTtlCap);

    c.forwards[0].transport = ForwardTransport::Udp;
    auto udp = Routing::build(c, known);
    EXPECT_FALSE(udp->route(wire("a.cluster.local").view()).rule->upstreams->tcp_only());
    EXPECT_TRUE(udp->moved_domains(*r).empty());
    c.forwards[0].max_ttl = 10;
    auto lower = Routing::build(c, known);
    EXPECT_EQ(lower->moved_domains(*udp).size(), 1u);
}

}  // namespace
}  // namespace nscache::upstream
