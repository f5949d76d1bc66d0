// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/hosts_file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace nscache::hostdb {
namespace {

constexpr const char* kHosts =
    "127.0.0.1 localhost\n"
    "::1 localhost ip6-localhost\n"
    "# a comment line\n"
    "192.0.2.1  web.example.test web www  # trailing comment\n"
    "192.0.2.2  Web.example.test other\n"
    "2001:db8::1 web.example.test\n"
    "::ffff:192.0.2.9 mapped\n"
    "not-an-address bad\n";

TEST(HostsTable, ByNameIsCaseInsensitiveAndMergesLinesWithMulti) {
    const HostsTable t = HostsTable::parse(kHosts, true);
    auto r = t.by_name("WEB.example.TEST", 2);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->canonical, "web.example.test");
    ASSERT_EQ(r->ipv4.size(), 2u);
    EXPECT_EQ(r->ipv4[1][3], 2);
    // glibc's merge: the first line's aliases, the later line's aliases, then its name.
    EXPECT_EQ(r->aliases, (std::vector<std::string>{"web", "www", "other", "Web.example.test"}));
    EXPECT_TRUE(r->ipv6.empty());
    EXPECT_TRUE(r->from_hosts_file);
}

TEST(HostsTable, DnsEntriesListEveryNameAndAddressLowerCasedWithATrailingDot) {
    const std::string text =
        std::string(kHosts) + "192.0.2.3 " + std::string(64, 'x') + ".test\n192.0.2.4 . root.\n";
    const auto entries = HostsTable::parse(text, true).dns_entries();
    auto has = [&](const char* name, uint16_t type, const char* address) {
        return std::count(entries.begin(), entries.end(),
                          upstream::HostsEntry{name, type, address}) == 1;
    };
    EXPECT_TRUE(has("localhost.", 1, "127.0.0.1"));
    EXPECT_TRUE(has("ip6-localhost.", 28, "::1"));
    EXPECT_TRUE(has("www.", 1, "192.0.2.1"));
    EXPECT_TRUE(has("web.example.test.", 1, "192.0.2.2"));  // "Web.example.test" on its line
    EXPECT_TRUE(has("web.example.test.", 28, "2001:db8::1"));
    EXPECT_TRUE(has("mapped.", 28, "::ffff:192.0.2.9"));
    // A 64-octet label is not a DNS name, nor is the root a local name; a line with no
    // address is not a line.
    EXPECT_TRUE(has("root.", 1, "192.0.2.4"));
    EXPECT_EQ(entries.size(), 11u);
}

TEST(HostsTable, WithoutMultiOnlyTheFirstLineCounts) {
    const HostsTable t = HostsTable::parse(kHosts, false);
    auto r = t.by_name("web.example.test", 2);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->ipv4.size(), 1u);
}

TEST(HostsTable, FamiliesAsGlibcReadsThem) {
    const HostsTable t = HostsTable::parse(kHosts, true);
    // AF_INET: ::1 is read as 127.0.0.1 and a v4-mapped line as its IPv4 address.
    auto lo = t.by_name("localhost", 2);
    ASSERT_TRUE(lo);
    EXPECT_EQ(lo->ipv4.size(), 2u);
    auto mapped = t.by_name("mapped", 2);
    ASSERT_TRUE(mapped);
    EXPECT_EQ(mapped->ipv4[0][3], 9);
    // AF_INET6: IPv4 lines do not count.
    auto v6 = t.by_name("web.example.test", 10);
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->ipv6.size(), 1u);
    EXPECT_FALSE(t.by_name("other", 10));
    // AF_UNSPEC: both families, no aliases.
    auto both = t.by_name("web.example.test", 0);
    ASSERT_TRUE(both);
    EXPECT_EQ(both->ipv4.size(), 2u);
    EXPECT_EQ(both->ipv6.size(), 1u);
    EXPECT_TRUE(both->aliases.empty());
    EXPECT_FALSE(t.by_name("bad", 0));
    EXPECT_FALSE(t.by_name("missing", 0));
}

TEST(HostsTable, ByAddressTakesTheFirstLine) {
    const HostsTable t = HostsTable::parse(kHosts, true);
    const uint8_t a[4] = {192, 0, 2, 1};
    auto r = t.by_addr(2, a);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->canonical, "web.example.test");
    EXPECT_EQ(r->aliases, (std::vector<std::string>{"web", "www"}));
    const uint8_t none[4] = {192, 0, 2, 77};
    EXPECT_FALSE(t.by_addr(2, none));
}

}  // namespace
}  // namespace nscache::hostdb

namespace nscache::hostdb {
namespace {

// Past 64 MiB only whole lines are read: the line whose newline is the first byte past the
// bound is whole and kept; the next one, cut, is not (a cut name must never be served).
TEST(HostsFile, AFileOverTheBoundIsReadToItsLastWholeLine) {
    constexpr size_t kBound = size_t{64} << 20;
    const std::string kept = "192.0.2.7 kept.test\n";
    std::string text;
    text.reserve(kBound + 64);
    const std::string filler = "# " + std::string(1021, 'x') + "\n";  // 1 KiB comment lines
    while (text.size() + filler.size() <= kBound + 1 - kept.size()) text += filler;
    text += std::string(kBound + 1 - kept.size() - text.size() - 1, '#') + "\n";
    text += kept;  // its newline is byte kBound, just past the bound
    text += "192.0.2.8 cut.test\n";
    ASSERT_EQ(text.size(), kBound + 1 + 19);
    char path[] = "/tmp/nscache-bighosts-XXXXXX";
    const int fd = mkstemp(path);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(write(fd, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(fd);
    const auto entries = read_hosts_entries(path);
    unlink(path);
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].name, "kept.test.");
}

// A FIFO at the path would block the host front's thread in open() until a writer came; a
// device would never end. Either reads as an empty file.
TEST(HostsFile, AFifoOrADeviceReadsAsEmptyWithoutBlocking) {
    char folder[] = "/tmp/nscache-hostsfifo-XXXXXX";
    ASSERT_NE(mkdtemp(folder), nullptr);
    const std::string fifo = std::string(folder) + "/hosts";
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    EXPECT_TRUE(read_hosts_entries(fifo).empty());
    EXPECT_TRUE(read_hosts_entries("/dev/zero").empty());
    unlink(fifo.c_str());
    rmdir(folder);
}

// The watch on the folder sees an editor's rename over the file; the one on the file sees a
// write in place. Either reloads the table on the loop's thread.
TEST(HostsFile, ReloadsWhenTheFileIsReplacedOrWritten) {
    char folder_template[] = "/tmp/nscache-hosts-XXXXXX";
    ASSERT_NE(mkdtemp(folder_template), nullptr);
    const std::string folder = folder_template;
    const std::string path = folder + "/hosts";
    auto write = [](const std::string& p, const std::string& text) {
        FILE* f = std::fopen(p.c_str(), "w");
        ASSERT_NE(f, nullptr);
        std::fputs(text.c_str(), f);
        std::fclose(f);
    };
    write(path, "192.0.2.1 one\n");
    EventLoop loop;
    HostsFile hosts(HostsFile::Paths{path, folder + "/host.conf"});
    int changes = 0;
    hosts.open(loop, [&changes] { ++changes; });
    EXPECT_TRUE(hosts.table().by_name("one", 2));

    write(folder + "/hosts.new", "192.0.2.2 two\n");
    ASSERT_EQ(std::rename((folder + "/hosts.new").c_str(), path.c_str()), 0);
    for (int i = 0; i < 50 && !hosts.table().by_name("two", 2); ++i) loop.run_once(20);
    EXPECT_TRUE(hosts.table().by_name("two", 2));
    EXPECT_FALSE(hosts.table().by_name("one", 2));

    write(path, "192.0.2.3 three\n");  // in place: the same inode
    for (int i = 0; i < 50 && !hosts.table().by_name("three", 2); ++i) loop.run_once(20);
    EXPECT_TRUE(hosts.table().by_name("three", 2));
    EXPECT_GE(changes, 3);  // the first read, and one reload (at least) per change

    std::remove(path.c_str());
    rmdir(folder.c_str());
}

}  // namespace
}  // namespace nscache::hostdb
