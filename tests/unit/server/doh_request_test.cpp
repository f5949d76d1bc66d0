// SPDX-License-Identifier: BSD-3-Clause
#include "server/doh_request.h"

#include <gtest/gtest.h>

#include <string>

#include "common/base64url.h"
#include "dns/wire.h"
#include "wire_builder.h"

namespace nscache::server {
namespace {

using testing::WireBuilder;

std::vector<uint8_t> a_query(uint16_t id = 0, uint16_t flags = dns::flag::RD) {
    WireBuilder w;
    w.header(id, flags, 1).question("www.example.com", dns::rtype::A);
    return w.bytes;
}

std::string get_path(const std::vector<uint8_t>& message,
                     std::string_view prefix = "/dns-query?dns=") {
    return std::string(prefix) + encode_base64url(message.data(), message.size());
}

DohRequestHead post(std::string_view path = "/dns-query",
                    std::string_view type = "application/dns-message",
                    std::string_view length = "") {
    return DohRequestHead{"POST", path, type, length};
}

TEST(DohRequest, GetDecodesTheDnsParameter) {
    const auto query = a_query(0);
    const std::string path = get_path(query);
    const DohHeadCheck check = check_request_head({"GET", path, "", ""}, "/dns-query");
    EXPECT_EQ(check.status, 0);
    EXPECT_FALSE(check.body_expected);
    EXPECT_EQ(check.query, query);  // ID 0 as sent
}

TEST(DohRequest, GetFindsDnsAmongOtherParameters) {
    const auto query = a_query(7);
    const std::string path = get_path(query, "/dns-query?ct=x&dns=") + "&other=1";
    const DohHeadCheck check = check_request_head({"GET", path, "", ""}, "/dns-query");
    EXPECT_EQ(check.status, 0);
    EXPECT_EQ(check.query, query);
}

TEST(DohRequest, GetWithoutOrWithABadDnsParameterIs400) {
    EXPECT_EQ(check_request_head({"GET", "/dns-query", "", ""}, "/dns-query").status, 400);
    EXPECT_EQ(check_request_head({"GET", "/dns-query?name=x", "", ""}, "/dns-query").status, 400);
    EXPECT_EQ(check_request_head({"GET", "/dns-query?dns=a+b/", "", ""}, "/dns-query").status, 400);
    EXPECT_EQ(check_request_head({"GET", "/dns-query?dns=AAAA", "", ""}, "/dns-query").status,
              400);  // three bytes: shorter than a header
    const std::string response = get_path(a_query(1, dns::flag::QR));
    EXPECT_EQ(check_request_head({"GET", response, "", ""}, "/dns-query").status, 400);
}

TEST(DohRequest, PostExpectsABody) {
    const DohHeadCheck check = check_request_head(post(), "/dns-query");
    EXPECT_EQ(check.status, 0);
    EXPECT_TRUE(check.body_expected);
    EXPECT_EQ(check_request_head(post("/dns-query", "Application/DNS-Message; charset=x", "33"),
                                 "/dns-query")
                  .status,
              0);
}

TEST(DohRequest, AnotherPathIs404) {
    EXPECT_EQ(check_request_head(post("/"), "/dns-query").status, 404);
    EXPECT_EQ(check_request_head(post("/dns-query/x"), "/dns-query").status, 404);
    EXPECT_EQ(check_request_head(post("/dns-quer"), "/dns-query").status, 404);
    EXPECT_EQ(check_request_head({"GET", "/resolve?dns=AAAA", "", ""}, "/dns-query").status, 404);
    EXPECT_EQ(check_request_head(post("/custom?x=1"), "/custom").status, 0);
}

TEST(DohRequest, AnotherMethodIs405) {
    EXPECT_EQ(check_request_head({"PUT", "/dns-query", kDnsMessageType, ""}, "/dns-query").status,
              405);
    EXPECT_EQ(check_request_head({"HEAD", "/dns-query?dns=x", "", ""}, "/dns-query").status, 405);
    EXPECT_EQ(check_request_head({"get", "/dns-query?dns=x", "", ""}, "/dns-query").status, 405);
}

TEST(DohRequest, PostOfAnotherContentTypeIs415) {
    EXPECT_EQ(check_request_head(post("/dns-query", ""), "/dns-query").status, 415);
    EXPECT_EQ(check_request_head(post("/dns-query", "text/plain"), "/dns-query").status, 415);
    EXPECT_EQ(
        check_request_head(post("/dns-query", "application/dns-message-x"), "/dns-query").status,
        415);
}

TEST(DohRequest, ContentLengthOverTheBoundIs413) {
    EXPECT_EQ(check_request_head(post("/dns-query", kDnsMessageType, "65535"), "/dns-query").status,
              0);
    EXPECT_EQ(check_request_head(post("/dns-query", kDnsMessageType, "65536"), "/dns-query").status,
              413);
    EXPECT_EQ(check_request_head(post("/dns-query", kDnsMessageType, "99999999999999999999999"),
                                 "/dns-query")
                  .status,
              413);
    EXPECT_EQ(check_request_head(post("/dns-query", kDnsMessageType, "12x"), "/dns-query").status,
              400);
}

TEST(DohRequest, LongPathIs414) {
    const std::string path = "/dns-query?dns=" + std::string(kMaxDohPath, 'A');
    EXPECT_EQ(check_request_head({"GET", path, "", ""}, "/dns-query").status, 414);
}

TEST(DohRequest, BodyChecks) {
    const auto query = a_query();
    EXPECT_EQ(check_dns_query(query), 0);
    EXPECT_EQ(check_dns_query(std::span<const uint8_t>(query.data(), 11)), 400);
    EXPECT_EQ(check_dns_query(a_query(3, dns::flag::QR)), 400);
    const std::vector<uint8_t> huge(kMaxDohMessage + 1, 0);
    EXPECT_EQ(check_dns_query(huge), 413);
    // Malformed past the header is the pipeline's to answer (FORMERR), as over UDP.
    WireBuilder no_question;
    no_question.header(1, 0, 0);
    EXPECT_EQ(check_dns_query(no_question.bytes), 0);
}

TEST(DohRequest, StatusTexts) {
    EXPECT_EQ(doh_status_text(404), "Not Found");
    EXPECT_EQ(doh_status_text(415), "Unsupported Media Type");
    EXPECT_EQ(doh_status_text(299), "Error");
}

}  // namespace
}  // namespace nscache::server
