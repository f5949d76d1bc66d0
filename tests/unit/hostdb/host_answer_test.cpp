// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/host_answer.h"

#include <gtest/gtest.h>

#include "cache/render.h"
#include "dns/name.h"
#include "dns/query.h"
#include "dns/response.h"
#include "wire_builder.h"

namespace nscache::hostdb {
namespace {

using testing::WireBuilder;

dns::NameBuffer wire(std::string_view text) {
    return *dns::name_from_text(text);
}

TEST(HostAnswer, FollowsCnameChainToAddresses) {
    WireBuilder b;
    b.header(0, dns::flag::QR | dns::flag::RA, 1, 3).question("Alias.example.test", dns::rtype::A);
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::CNAME, 60, 0);
    const size_t rdlen_at = b.size() - 2;
    b.name("mid.example.test");
    dns::write_u16(&b.bytes[rdlen_at], 18);
    b.name("mid.example.test").rr_fixed(dns::rtype::CNAME, 30, 18).name("www.example.test");
    b.name("www.example.test").rr_fixed(dns::rtype::A, 300, 4).raw({192, 0, 2, 1});
    auto r = host_answer_from_dns(b.view(), wire("alias.example.test").view(), dns::rtype::A);
    EXPECT_EQ(r.status, HostStatus::Found);
    EXPECT_EQ(r.canonical, "www.example.test");
    ASSERT_EQ(r.aliases.size(), 2u);
    EXPECT_EQ(r.aliases[0], "alias.example.test");
    EXPECT_EQ(r.aliases[1], "mid.example.test");
    ASSERT_EQ(r.ipv4.size(), 1u);
    EXPECT_EQ(r.ipv4[0][3], 1);
    EXPECT_EQ(r.ttl, 30u);
}

TEST(HostAnswer, NegativeAnswersTakeTheSoaTtl) {
    WireBuilder b;
    b.header(0, dns::flag::QR | 3, 1, 0, 1).question("nx.example.test", dns::rtype::A);
    b.name("example.test").rr_fixed(dns::rtype::SOA, 45, 0);
    const size_t rdlen_at = b.size() - 2;
    const size_t start = b.size();
    b.name("ns.example.test").name("admin.example.test").u32(1).u32(2).u32(3).u32(4).u32(60);
    dns::write_u16(&b.bytes[rdlen_at], static_cast<uint16_t>(b.size() - start));
    auto r = host_answer_from_dns(b.view(), wire("nx.example.test").view(), dns::rtype::A);
    EXPECT_EQ(r.status, HostStatus::NotFound);
    EXPECT_EQ(r.ttl, 45u);
    b.bytes[3] = 0;  // NOERROR: NODATA
    EXPECT_EQ(host_answer_from_dns(b.view(), wire("nx.example.test").view(), dns::rtype::A).status,
              HostStatus::NoData);
}

TEST(HostAnswer, FailuresAreTryAgain) {
    WireBuilder b;
    b.header(0, dns::flag::QR | 2, 1).question("x.example.test", dns::rtype::A);
    EXPECT_EQ(host_answer_from_dns(b.view(), wire("x.example.test").view(), dns::rtype::A).status,
              HostStatus::TryAgain);
    EXPECT_EQ(host_answer_from_dns({}, wire("x.example.test").view(), dns::rtype::A).status,
              HostStatus::TryAgain);
}

TEST(CombineAnswers, UnspecFamilyRules) {
    const auto make = [](HostStatus status, uint32_t ttl) {
        HostAnswer r;
        r.status = status;
        r.ttl = ttl;
        return r;
    };
    HostAnswer a = make(HostStatus::Found, 300);
    a.canonical = "h";
    a.ipv4 = {{192, 0, 2, 1}};
    const HostAnswer nodata = make(HostStatus::NoData, 60);
    const HostAnswer nx = make(HostStatus::NotFound, 60);
    const HostAnswer fail = make(HostStatus::TryAgain, 0);
    auto r = combine_answers(a, nodata);
    EXPECT_EQ(r.status, HostStatus::Found);
    EXPECT_EQ(r.ttl, 60u);  // kept no longer than the "no AAAA" is known
    EXPECT_EQ(combine_answers(nx, nx).status, HostStatus::NotFound);
    EXPECT_EQ(combine_answers(nodata, nodata).status, HostStatus::NoData);
    EXPECT_EQ(combine_answers(nodata, fail).status, HostStatus::TryAgain);
    EXPECT_EQ(combine_answers(a, fail).ttl, 0u);  // served, not published
}

TEST(ReverseName, Ipv4AndIpv6) {
    const uint8_t v4[4] = {192, 0, 2, 10};
    EXPECT_EQ(dns::name_to_text(reverse_name(2, v4)), "10.2.0.192.in-addr.arpa.");
    uint8_t v6[16] = {0x20, 0x01, 0x0d, 0xb8};
    v6[15] = 0x1;
    const std::string text = dns::name_to_text(reverse_name(10, v6));
    EXPECT_EQ(text.substr(0, 4), "1.0.");
    EXPECT_EQ(text.substr(text.size() - 25), "8.b.d.0.1.0.0.2.ip6.arpa.");
}

// Reading the cached records directly gives what reading the message the cache renders from
// them gave (the host lookup used to render and parse back): names through compression
// pointers into the question, the CNAME chain, TTLs counted down by age or made stale.
TEST(HostAnswer, FromCacheIsWhatTheRenderedMessageSays) {
    WireBuilder cname;
    cname.header(7, dns::flag::QR | dns::flag::RA, 1, 2)
        .question("Alias.example.test", dns::rtype::A);
    cname.name_then_pointer("", 12).rr_fixed(dns::rtype::CNAME, 60, 6);
    cname.name_then_pointer("www", 12 + 6);  // www.example.test, compressed into the question
    cname.name_then_pointer("www", 12 + 6).rr_fixed(dns::rtype::A, 300, 4).raw({192, 0, 2, 4});

    WireBuilder negative;
    negative.header(7, dns::flag::QR | 3, 1, 0, 1).question("nx.example.test", dns::rtype::A);
    negative.name_then_pointer("", 12 + 3).rr_fixed(dns::rtype::SOA, 45, 0);
    const size_t rdlen_at = negative.size() - 2;
    const size_t start = negative.size();
    negative.name("ns.example.test").name("admin.example.test").u32(1).u32(2).u32(3).u32(4).u32(60);
    dns::write_u16(&negative.bytes[rdlen_at], static_cast<uint16_t>(negative.size() - start));

    const std::pair<const WireBuilder*, const char*> cases[] = {{&cname, "Alias.example.test"},
                                                                {&negative, "nx.example.test"}};
    for (const auto& [msg, name] : cases) {
        dns::ScannedResponse scan;
        ASSERT_TRUE(dns::scan_response(msg->view(), scan));
        const auto prepared = cache::prepare_answer(msg->view(), scan, cache::TtlPolicy{});
        ASSERT_TRUE(prepared);
        WireBuilder asked;
        asked.header(7, dns::flag::RD, 1).question(name, dns::rtype::A);
        const dns::ParsedQuery client = dns::parse_query(asked.view());
        ASSERT_EQ(client.verdict, dns::QueryVerdict::Ok);
        dns::NameBuffer lower;
        dns::lower_name(client.query.qname, lower);
        for (const uint32_t age : {0u, 10u, 400u}) {
            for (const bool stale : {false, true}) {
                std::vector<uint8_t> out(65535);
                bool truncated = false;
                dns::Query q = client.query;
                q.header.flags = dns::flag::RD;
                const size_t n =
                    cache::render_answer(prepared->view(), q, age, stale,
                                         cache::RenderLimits{65535, 1232}, out, &truncated);
                const HostAnswer rendered =
                    host_answer_from_dns(dns::Bytes(out.data(), n), lower.view(), dns::rtype::A);
                std::vector<uint8_t> scratch;
                const HostAnswer direct = host_answer_from_cache(
                    prepared->view(), lower.view(), dns::rtype::A, age, stale, scratch);
                EXPECT_EQ(rendered.status,
                          msg == &cname ? HostStatus::Found : HostStatus::NotFound);
                EXPECT_EQ(direct.status, rendered.status);
                EXPECT_EQ(direct.ttl, rendered.ttl) << "age " << age << " stale " << stale;
                EXPECT_EQ(direct.canonical, rendered.canonical);
                EXPECT_EQ(direct.aliases, rendered.aliases);
                EXPECT_EQ(direct.ipv4, rendered.ipv4);
            }
        }
    }
}

}  // namespace
}  // namespace nscache::hostdb
