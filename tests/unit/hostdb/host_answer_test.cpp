// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/host_answer.h"

#include <gtest/gtest.h>

#include "dns/name.h"
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

}  // namespace
}  // namespace nscache::hostdb
