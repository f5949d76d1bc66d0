// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/local_answer.h"

#include <gtest/gtest.h>

#include "cache/cache_test_support.h"
#include "cache/render.h"
#include "dns/response.h"

namespace nscache::upstream {
namespace {

Question question(std::string_view name, uint16_t qtype, uint16_t qclass = dns::kClassIN) {
    Question q;
    dns::lower_name(dns::name_from_text(name)->view(), q.name);
    q.qtype = qtype;
    q.qclass = qclass;
    return q;
}

// The answer as a client gets it, checked by the response scanner.
struct Rendered {
    std::vector<uint8_t> bytes;
    dns::ScannedResponse scan;
};

Rendered render(const cache::PreparedAnswer& a, std::string_view name, uint16_t qtype,
                uint16_t qclass = dns::kClassIN) {
    cache::testing::ClientQuery q(name, qtype);
    Rendered r;
    r.bytes.resize(4096);
    bool truncated = false;
    cache::RenderLimits limits;
    limits.max_size = 4096;
    const size_t n =
        cache::render_answer(a.view(), q.query(), 0, false, limits, r.bytes, &truncated);
    r.bytes.resize(n);
    EXPECT_TRUE(dns::scan_response(dns::Bytes(r.bytes), r.scan)) << name;
    (void)qclass;
    return r;
}

std::shared_ptr<const Routing> routing_with(std::vector<std::string> records) {
    Config c;
    c.upstreams = {*parse_socket_address("192.0.2.1:53", std::nullopt)};
    std::string error;
    for (const auto& text : records) c.local_records.push_back(*parse_local_record(text, error));
    static UpstreamRegistry known;
    return Routing::build(c, known);
}

TEST(LocalAnswer, LocalhostAnswersLoopbackAndNodataWithAnSoa) {
    auto routing = routing_with({});
    const Question a = question("db.localhost", dns::rtype::A);
    const auto answer = local_answer(*routing, routing->route(a.name.view()), a, 300);
    const Rendered r = render(answer, "db.localhost", dns::rtype::A);
    EXPECT_TRUE(r.scan.header.has(dns::flag::AA));
    ASSERT_EQ(r.scan.records.size(), 1u);
    EXPECT_EQ(r.bytes.back(), 1);  // 127.0.0.1
    const Question mx = question("localhost", dns::rtype::MX);
    const Rendered nodata = render(local_answer(*routing, routing->route(mx.name.view()), mx, 300),
                                   "localhost", dns::rtype::MX);
    EXPECT_EQ(nodata.scan.header.rcode(), 0);
    EXPECT_EQ(nodata.scan.header.ancount, 0);
    ASSERT_EQ(nodata.scan.records.size(), 1u);
    EXPECT_EQ(nodata.scan.records[0].type, dns::rtype::SOA);
}

TEST(LocalAnswer, PrivateZoneIsNxdomainBelowItsApexAndEmptyAtIt) {
    auto routing = routing_with({});
    const Question below = question("1.1.168.192.in-addr.arpa", dns::rtype::PTR);
    const Rendered nx = render(local_answer(*routing, routing->route(below.name.view()), below, 60),
                               "1.1.168.192.in-addr.arpa", dns::rtype::PTR);
    EXPECT_EQ(nx.scan.header.rcode(), 3);
    ASSERT_EQ(nx.scan.records.size(), 1u);
    EXPECT_EQ(nx.scan.records[0].type, dns::rtype::SOA);
    const Question apex = question("168.192.in-addr.arpa", dns::rtype::SOA);
    const Rendered soa = render(local_answer(*routing, routing->route(apex.name.view()), apex, 60),
                                "168.192.in-addr.arpa", dns::rtype::SOA);
    EXPECT_EQ(soa.scan.header.rcode(), 0);
    EXPECT_EQ(soa.scan.header.ancount, 1);
}

TEST(LocalAnswer, LocalCnameIsFollowedThroughLocalData) {
    auto routing = routing_with({"printer.lan A 192.168.1.9", "alias.lan CNAME printer.lan",
                                 "away.lan CNAME www.example.org"});
    const Question q = question("alias.lan", dns::rtype::A);
    const Rendered r = render(local_answer(*routing, routing->route(q.name.view()), q, 300),
                              "alias.lan", dns::rtype::A);
    ASSERT_EQ(r.scan.records.size(), 2u);
    EXPECT_EQ(r.scan.records[0].type, dns::rtype::CNAME);
    EXPECT_EQ(r.scan.records[1].type, dns::rtype::A);
    const Question away = question("away.lan", dns::rtype::A);
    const Rendered dangling =
        render(local_answer(*routing, routing->route(away.name.view()), away, 300), "away.lan",
               dns::rtype::A);
    ASSERT_EQ(dangling.scan.header.ancount, 1);  // the CNAME, for the client to follow
}

TEST(LocalAnswer, ChaosIdentityIsRefusedUnlessConfigured) {
    const Question v = question("version.bind", dns::rtype::TXT, kClassChaos);
    EXPECT_EQ(chaos_answer(v, "", "").rcode, static_cast<uint8_t>(dns::Rcode::Refused));
    // A refusal is no authoritative answer (RFC 1035 §4.1.1: AA speaks for the answer section).
    EXPECT_FALSE(chaos_answer(v, "", "").aa);
    const auto named = chaos_answer(v, "nscache 1", "");
    EXPECT_EQ(named.rcode, 0);
    EXPECT_TRUE(named.aa);
    EXPECT_EQ(named.ancount, 1);
    const Question other = question("authors.bind", dns::rtype::TXT, kClassChaos);
    EXPECT_EQ(chaos_answer(other, "x", "y").rcode, static_cast<uint8_t>(dns::Rcode::Refused));
    EXPECT_FALSE(chaos_answer(other, "x", "y").aa);
}

}  // namespace
}  // namespace nscache::upstream
