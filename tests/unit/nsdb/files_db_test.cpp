// SPDX-License-Identifier: BSD-3-Clause
#include "nsdb/files_db.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace nscache::nsdb {
namespace {

TEST(PasswdFile, ParsesEntriesFirstMatchWins) {
    PasswdFile f = PasswdFile::parse(
        "# comment\n"
        "\n"
        "root:x:0:0:root:/root:/bin/bash\n"
        "  alice:x:1000:1000:Alice A,,,:/home/alice:/bin/sh\n"
        "alice:x:1001:1001::/home/other:/bin/sh\n"
        "bob:x:1000:1002::/home/bob:/bin/sh\n");
    ASSERT_EQ(f.size(), 4u);
    const PasswdEntry* a = f.by_name("alice");
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(a->uid, 1000u);
    EXPECT_EQ(a->gecos, "Alice A,,,");
    EXPECT_EQ(a->dir, "/home/alice");
    ASSERT_NE(f.by_uid(1000), nullptr);
    EXPECT_EQ(f.by_uid(1000)->name, "alice");
    EXPECT_EQ(f.by_uid(1002), nullptr);
    EXPECT_EQ(f.by_name("nobody"), nullptr);
}

TEST(PasswdFile, SkipsBadLinesAsFilesDoes) {
    PasswdFile f = PasswdFile::parse(
        "noids\n"
        "emptyuid:x::100:::\n"
        "textuid:x:abc:100:::\n"
        "trailing:x:12x:100:::\n"
        "short:x:5:6\n"  // missing trailing fields are empty, not an error
        "colons:x:7:8:g:/d:/bin/sh:extra\n"
        "huge:x:99999999999:1:::\n");
    EXPECT_EQ(f.by_name("noids"), nullptr);
    EXPECT_EQ(f.by_name("emptyuid"), nullptr);
    EXPECT_EQ(f.by_name("textuid"), nullptr);
    EXPECT_EQ(f.by_name("trailing"), nullptr);
    const PasswdEntry* s = f.by_name("short");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->gid, 6u);
    EXPECT_EQ(s->shell, "");
    ASSERT_NE(f.by_name("colons"), nullptr);
    EXPECT_EQ(f.by_name("colons")->shell, "/bin/sh:extra");
    ASSERT_NE(f.by_name("huge"), nullptr);
    EXPECT_EQ(f.by_name("huge")->uid, 0xffffffffu);  // glibc's strtou32 clamps
}

TEST(PasswdFile, CountsCompatLines) {
    PasswdFile f = PasswdFile::parse("+@admins\n-baduser\n+\nalice:x:1:1:::\n+bob:::::\n");
    EXPECT_EQ(f.compat_lines(), 4u);
    EXPECT_EQ(f.size(), 1u);
    EXPECT_EQ(f.by_name("+bob"), nullptr);
    EXPECT_EQ(PasswdFile::parse("alice:x:1:1:::\n").compat_lines(), 0u);
}

TEST(PasswdFile, ReadMissingFileIsAnError) {
    std::string error;
    EXPECT_FALSE(PasswdFile::read("/nonexistent/passwd", error));
    EXPECT_FALSE(error.empty());
}

TEST(GroupFile, MembersAndMembership) {
    GroupFile f = GroupFile::parse(
        "wheel:x:10:alice, bob,,carol\n"
        "staff:x:50:\n"
        "users:x:100:bob,alice,alice\n"
        "wheel:x:11:dave\n"
        "+nis\n"
        "bad:x::alice\n"
        "nomem:x:60\n");
    const GroupEntry* w = f.by_name("wheel");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->gid, 10u);
    EXPECT_EQ(w->members, (std::vector<std::string>{"alice", "bob", "carol"}));
    ASSERT_NE(f.by_gid(50), nullptr);
    EXPECT_TRUE(f.by_gid(50)->members.empty());
    ASSERT_NE(f.by_name("nomem"), nullptr);
    EXPECT_EQ(f.by_name("bad"), nullptr);
    EXPECT_EQ(f.compat_lines(), 1u);
    EXPECT_EQ(f.groups_of("alice"), (std::vector<uint32_t>{10, 100}));
    EXPECT_EQ(f.groups_of("dave"), (std::vector<uint32_t>{11}));
    EXPECT_TRUE(f.groups_of("nobody").empty());
}

TEST(ServicesFile, NamesAliasesProtocols) {
    ServicesFile f = ServicesFile::parse(
        "# /etc/services\n"
        "ssh\t\t22/tcp\t\t\t# SSH Remote Login Protocol\n"
        "domain\t\t53/tcp\n"
        "domain\t\t53/udp\n"
        "http\t\t80/tcp\t\twww  www-http\t# WorldWideWeb HTTP\n"
        "noproto 99\n"
        "bad x/tcp\n"
        "hex 0x10/udp\n"
        "http 8080/tcp\n");
    const ServiceEntry* s = f.by_name("ssh", "");
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->port, htons(22));
    EXPECT_EQ(s->proto, "tcp");
    EXPECT_TRUE(s->aliases.empty());
    ASSERT_NE(f.by_name("domain", "udp"), nullptr);
    EXPECT_EQ(f.by_name("domain", "udp")->proto, "udp");
    EXPECT_EQ(f.by_name("domain", "")->proto, "tcp");  // the first line
    EXPECT_EQ(f.by_name("ssh", "udp"), nullptr);
    const ServiceEntry* w = f.by_name("www", "tcp");
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->name, "http");
    EXPECT_EQ(w->aliases, (std::vector<std::string>{"www", "www-http"}));
    EXPECT_EQ(f.by_name("http", "")->port, htons(80));
    EXPECT_EQ(f.by_name("noproto", ""), nullptr);
    EXPECT_EQ(f.by_name("bad", ""), nullptr);
    ASSERT_NE(f.by_name("hex", ""), nullptr);
    EXPECT_EQ(f.by_name("hex", "")->port, htons(16));
}

TEST(ServicesFile, ByPortTakesNetworkOrder) {
    ServicesFile f = ServicesFile::parse("http 80/tcp www\ndomain 53/tcp\ndomain 53/udp\n");
    const ServiceEntry* h = f.by_port(htons(80), "tcp");
    ASSERT_NE(h, nullptr);
    EXPECT_EQ(h->name, "http");
    EXPECT_EQ(f.by_port(80, "tcp"), nullptr);  // host order is another port (20480 on x86)
    EXPECT_EQ(f.by_port(htons(53), "")->proto, "tcp");
    EXPECT_EQ(f.by_port(htons(53), "udp")->proto, "udp");
    EXPECT_EQ(f.by_port(htons(80), "udp"), nullptr);
}

}  // namespace
}  // namespace nscache::nsdb
