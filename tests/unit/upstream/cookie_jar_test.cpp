// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/cookie_jar.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace nscache::upstream {
namespace {

SocketAddress addr(const char* text) {
    return *parse_socket_address(text, std::nullopt);
}

ClientCookie client_of(const CookieOption& o) {
    ClientCookie c;
    std::copy_n(o.bytes.begin(), kClientCookieSize, c.bytes.begin());
    return c;
}

std::vector<uint8_t> echo(const ClientCookie& c, size_t server_size, uint8_t fill) {
    std::vector<uint8_t> v(c.bytes.begin(), c.bytes.end());
    v.insert(v.end(), server_size, fill);
    return v;
}

TEST(CookieJar, OneClientCookiePerServerAndItsServerCookieEchoed) {
    CookieJar jar;
    const auto a = addr("192.0.2.1:53");
    const auto b = addr("192.0.2.2:53");
    const CookieOption first = jar.option_for(a, 0);
    EXPECT_EQ(first.size, kClientCookieSize);  // no server cookie known yet
    EXPECT_EQ(client_of(jar.option_for(a, 1)), client_of(first));
    EXPECT_NE(client_of(jar.option_for(b, 1)), client_of(first));  // RFC 7873 §4.1: per server

    const auto answer = echo(client_of(first), 16, 0xAB);
    EXPECT_EQ(jar.check(a, client_of(first), true, answer), CookieVerdict::Good);
    const CookieOption next = jar.option_for(a, 2);
    ASSERT_EQ(next.size, 24u);
    EXPECT_EQ(next.bytes[8], 0xAB);
    EXPECT_EQ(next.bytes[23], 0xAB);
}

TEST(CookieJar, AnswersWithoutOurCookie) {
    CookieJar jar;
    const auto a = addr("192.0.2.1:53");
    const ClientCookie ours = client_of(jar.option_for(a, 0));
    // A server that never sent a cookie: an answer without one is as before cookies.
    EXPECT_EQ(jar.check(a, ours, false, {}), CookieVerdict::None);
    ClientCookie other = ours;
    other.bytes[0] ^= 1;
    EXPECT_EQ(jar.check(a, ours, true, echo(other, 16, 1)), CookieVerdict::Wrong);
    EXPECT_EQ(jar.check(a, ours, true, echo(ours, 4, 1)), CookieVerdict::Wrong);   // 8..32
    EXPECT_EQ(jar.check(a, ours, true, echo(ours, 33, 1)), CookieVerdict::Wrong);  // 8..32
    EXPECT_EQ(jar.check(a, ours, true, std::vector<uint8_t>(5, 0)), CookieVerdict::Wrong);
    // Once it has sent one, leaving it out is a forger's move.
    EXPECT_EQ(jar.check(a, ours, true, echo(ours, 8, 7)), CookieVerdict::Good);
    EXPECT_EQ(jar.check(a, ours, false, {}), CookieVerdict::Missing);
    jar.forget(a);
    EXPECT_EQ(jar.check(a, ours, false, {}), CookieVerdict::None);
}

TEST(CookieJar, SecretRotatesAndItsServerCookiesGoWithIt) {
    CookieJar jar;
    const auto a = addr("[2001:db8::1]:53");
    const ClientCookie before = client_of(jar.option_for(a, 1000));
    EXPECT_EQ(jar.check(a, before, true, echo(before, 16, 3)), CookieVerdict::Good);
    const CookieOption after = jar.option_for(a, 1000 + CookieJar::kSecretLifetimeMs);
    EXPECT_NE(client_of(after), before);
    EXPECT_EQ(after.size, kClientCookieSize);
}

// Direct-mapped, two servers on one slot wiped each other's server cookie, and an answer that
// left the cookie out passed as None (what a forger who guessed ID and port would send). More
// servers than the old 64 slots hold: some pair of them must collide, whatever the seed.
TEST(CookieJar, NoServerLosesItsCookieToAnother) {
    CookieJar jar;
    std::vector<SocketAddress> servers;
    std::vector<ClientCookie> ours;
    for (int i = 0; i < 200; ++i) {
        servers.push_back(
            addr(("127.0." + std::to_string(i / 100) + "." + std::to_string(1 + i % 100) + ":53")
                     .c_str()));
        ours.push_back(client_of(jar.option_for(servers.back(), 0)));
        ASSERT_EQ(jar.check(servers.back(), ours.back(), true,
                            echo(ours.back(), 8, static_cast<uint8_t>(i))),
                  CookieVerdict::Good);
    }
    size_t missing = 0;
    size_t echoed = 0;
    for (size_t i = 0; i < servers.size(); ++i) {
        if (jar.check(servers[i], ours[i], false, {}) == CookieVerdict::Missing) ++missing;
        const CookieOption next = jar.option_for(servers[i], 1);
        if (next.size == 16 && next.bytes[8] == static_cast<uint8_t>(i)) ++echoed;
    }
    EXPECT_EQ(missing, servers.size());
    EXPECT_EQ(echoed, servers.size());
}

}  // namespace
}  // namespace nscache::upstream
