// SPDX-License-Identifier: BSD-3-Clause
#include "server/access_list.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <string_view>
#include <vector>

namespace nscache::server {
namespace {

AccessList list_of(std::initializer_list<std::string_view> prefixes) {
    std::vector<Cidr> cidrs;
    for (std::string_view p : prefixes) cidrs.push_back(*parse_cidr(p));
    return AccessList(std::move(cidrs));
}

TEST(AccessList, ReachesBeyondLoopback) {
    EXPECT_FALSE(list_of({"127.0.0.0/8", "::1/128"}).reaches_beyond_loopback());
    EXPECT_FALSE(list_of({"127.0.0.2/32", "127.1.0.0/16"}).reaches_beyond_loopback());
    EXPECT_FALSE(list_of({"::ffff:127.0.0.0/104"}).reaches_beyond_loopback());
    EXPECT_FALSE(list_of({}).reaches_beyond_loopback());

    EXPECT_TRUE(list_of({"127.0.0.0/8", "192.0.2.0/24"}).reaches_beyond_loopback());
    EXPECT_TRUE(list_of({"127.0.0.0/7"}).reaches_beyond_loopback());  // 126/8 too
    EXPECT_TRUE(list_of({"0.0.0.0/0"}).reaches_beyond_loopback());
    EXPECT_TRUE(list_of({"::/0"}).reaches_beyond_loopback());
    EXPECT_TRUE(list_of({"::1/127"}).reaches_beyond_loopback());
    EXPECT_TRUE(list_of({"::ffff:0.0.0.0/96"}).reaches_beyond_loopback());
}

sockaddr_storage v4(const char* text) {
    sockaddr_storage ss{};
    auto* a = reinterpret_cast<sockaddr_in*>(&ss);
    a->sin_family = AF_INET;
    inet_pton(AF_INET, text, &a->sin_addr);
    return ss;
}

TEST(AccessList, LoopbackFastPathOnlyWhenAllOf127IsAllowed) {
    const auto allows = [](const AccessList& l, const char* ip) {
        const sockaddr_storage ss = v4(ip);
        return l.allows(reinterpret_cast<const sockaddr*>(&ss));
    };
    const AccessList all = list_of({"127.0.0.0/8", "::1/128"});
    EXPECT_TRUE(allows(all, "127.0.0.1"));
    EXPECT_TRUE(allows(all, "127.9.8.7"));
    EXPECT_FALSE(allows(all, "192.0.2.1"));
    const AccessList one = list_of({"127.0.0.2/32"});
    EXPECT_TRUE(allows(one, "127.0.0.2"));
    EXPECT_FALSE(allows(one, "127.0.0.3"));
    EXPECT_FALSE(allows(list_of({}), "127.0.0.1"));
}

}  // namespace
}  // namespace nscache::server
