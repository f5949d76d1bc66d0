// SPDX-License-Identifier: BSD-3-Clause
// Against the test module tests/nssmod/nss_nscachetest.c (build/nss/libnss_nscachetest.so.2),
// whose entries and failures come from the file in $NSCACHETEST_CONF.
#include "nsdb/module_chain.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fake_clock.h"

namespace nscache::nsdb {
namespace {

class ModuleChainTest : public ::testing::Test {
  protected:
    void SetUp() override {
        conf_ = ::testing::TempDir() + "nscachetest." + std::to_string(getpid()) + ".conf";
        setenv("NSCACHETEST_CONF", conf_.c_str(), 1);
    }
    void TearDown() override {
        unlink(conf_.c_str());
        unsetenv("NSCACHETEST_CONF");
    }
    void write(const std::string& text) { std::ofstream(conf_) << text; }
    ModuleChain chain(std::vector<std::string> services) {
        return ModuleChain(std::move(services), NSCACHE_TEST_NSS_DIR);
    }
    std::string conf_;
};

TEST_F(ModuleChainTest, FindsPasswdAndGroupEntries) {
    write("user alice 5000 5001 Alice /home/alice /bin/bash\ngroup devs 6000 alice,bob\n");
    ModuleChain c(std::vector<std::string>{"nscachetest"}, NSCACHE_TEST_NSS_DIR);
    PasswdResult p = c.passwd_by_name("alice");
    ASSERT_EQ(p.status, Status::found);
    EXPECT_EQ(p.entry, (PasswdEntry{.name = "alice",
                                    .passwd = "x",
                                    .uid = 5000,
                                    .gid = 5001,
                                    .gecos = "Alice",
                                    .dir = "/home/alice",
                                    .shell = "/bin/bash"}));
    EXPECT_EQ(c.passwd_by_uid(5000).entry.name, "alice");
    EXPECT_EQ(c.passwd_by_name("nobody").status, Status::not_found);
    EXPECT_EQ(c.passwd_by_uid(4).status, Status::not_found);
    GroupResult g = c.group_by_gid(6000);
    ASSERT_EQ(g.status, Status::found);
    EXPECT_EQ(g.entry.name, "devs");
    EXPECT_EQ(g.entry.members, (std::vector<std::string>{"alice", "bob"}));
    EXPECT_EQ(c.group_by_name("devs").entry.gid, 6000u);
    EXPECT_EQ(c.group_by_name("nope").status, Status::not_found);
}

TEST_F(ModuleChainTest, FindsServices) {
    write("service myproto 4242 tcp mp my-proto\n");
    ModuleChain c(std::vector<std::string>{"nscachetest"}, NSCACHE_TEST_NSS_DIR);
    ServiceResult s = c.service_by_name("mp", "tcp");
    ASSERT_EQ(s.status, Status::found);
    EXPECT_EQ(s.entry.name, "myproto");
    EXPECT_EQ(s.entry.port, htons(4242));
    EXPECT_EQ(s.entry.aliases, (std::vector<std::string>{"mp", "my-proto"}));
    EXPECT_EQ(c.service_by_name("myproto", "").status, Status::found);
    EXPECT_EQ(c.service_by_name("myproto", "udp").status, Status::not_found);
    EXPECT_EQ(c.service_by_port(htons(4242), "").entry.name, "myproto");
    EXPECT_EQ(c.service_by_port(4242, "").status, Status::not_found);
}

TEST_F(ModuleChainTest, TryagainAndUnavailAreNeverNotFound) {
    write("user alice 5000 5000\ntryagain alice\nunavail 5000\n");
    ModuleChain c(std::vector<std::string>{"nscachetest"}, NSCACHE_TEST_NSS_DIR);
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::unavailable);
    EXPECT_EQ(c.passwd_by_uid(5000).status, Status::unavailable);
    write("user alice 5000 5000\nunavail-all\n");
    EXPECT_EQ(c.group_by_name("x").status, Status::unavailable);
    EXPECT_EQ(c.groups_of("alice", 5000).status, Status::unavailable);
    write("user alice 5000 5000\n");  // the directory is back: found at once
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::found);
}

TEST_F(ModuleChainTest, GrowsTheBufferOnErange) {
    std::string members;
    std::vector<std::string> expected;
    for (int i = 0; i < 600; ++i) {
        expected.push_back("member" + std::to_string(i));
        members += (i ? "," : "") + expected.back();
    }
    ASSERT_GT(members.size(), 4096u);
    write("group big 7000 " + members + "\n");
    ModuleChain c(std::vector<std::string>{"nscachetest"}, NSCACHE_TEST_NSS_DIR);
    GroupResult g = c.group_by_name("big");
    ASSERT_EQ(g.status, Status::found);
    EXPECT_EQ(g.entry.members, expected);
}

TEST_F(ModuleChainTest, MissingModuleIsSkipped) {
    write("user alice 5000 5000\n");
    ModuleChain c(std::vector<std::string>{"nscachetest-not-installed", "nscachetest"},
                  NSCACHE_TEST_NSS_DIR);
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::found);
    EXPECT_EQ(c.passwd_by_name("bob").status, Status::not_found);
    ModuleChain none(std::vector<std::string>{"nscachetest-not-installed"}, NSCACHE_TEST_NSS_DIR);
    EXPECT_EQ(none.passwd_by_name("alice").status, Status::not_found);
}

TEST_F(ModuleChainTest, GroupsOfMergesModulesWithoutPrimaryOrDuplicates) {
    write("group a 100 alice\ngroup prim 5000 alice\ngroup b 101 bob,alice\ngroup c 100 alice\n");
    // The same module twice stands for two sources: glibc merges both lists.
    ModuleChain c(std::vector<std::string>{"nscachetest", "nscachetest"}, NSCACHE_TEST_NSS_DIR);
    GroupListResult all = c.groups_of("alice", 5000);
    ASSERT_EQ(all.status, Status::found);
    EXPECT_EQ(all.entry, (std::vector<uint32_t>{100, 101}));
    EXPECT_EQ(c.groups_of("alice", 5000, false).entry, (std::vector<uint32_t>{100, 101}));
    EXPECT_EQ(c.groups_of("nobody", 1).status, Status::not_found);
    EXPECT_TRUE(c.groups_of("nobody", 1).entry.empty());
}

TEST_F(ModuleChainTest, GroupsOfStopsAtFirstSuccessOnlyWithAnInitgroupsLine) {
    std::string counts = conf_ + ".count";
    write("group a 100 alice\ncount-file " + counts + "\n");
    ModuleChain c(std::vector<std::string>{"nscachetest", "nscachetest"}, NSCACHE_TEST_NSS_DIR);
    auto calls = [&] {
        std::ifstream in(counts);
        std::string line;
        int n = 0;
        while (std::getline(in, line)) ++n;
        unlink(counts.c_str());
        return n;
    };
    EXPECT_EQ(c.groups_of("alice", 1, false).status, Status::found);
    EXPECT_EQ(calls(), 1);  // the first SUCCESS ends it
    EXPECT_EQ(c.groups_of("alice", 1, true).status, Status::found);
    EXPECT_EQ(calls(), 2);  // every source is asked
    EXPECT_EQ(c.groups_of("bob", 1, false).status, Status::not_found);
    EXPECT_EQ(calls(), 2);  // NOTFOUND goes on to the next
    // A source that is down and none that finds it: unavailable, not "member of nothing".
    write("tryagain carol\n");
    EXPECT_EQ(c.groups_of("carol", 1, true).status, Status::unavailable);
}

TEST_F(ModuleChainTest, GroupsOfEnumeratesAModuleWithoutInitgroups) {
    write("group a 100 alice\ngroup p 7 alice\ngroup b 101 bob\ngroup c 102 bob,alice\n");
    ModuleChain c(std::vector<std::string>{"nscachetestenum"}, NSCACHE_TEST_NSS_DIR);
    GroupListResult r = c.groups_of("alice", 7);
    ASSERT_EQ(r.status, Status::found);
    EXPECT_EQ(r.entry, (std::vector<uint32_t>{100, 102}));
    EXPECT_EQ(c.groups_of("nobody", 7).status, Status::not_found);
    write("unavail-all\n");
    EXPECT_EQ(c.groups_of("alice", 7).status, Status::unavailable);
}

TEST_F(ModuleChainTest, CountsCallsInTheCountFile) {
    std::string counts = conf_ + ".count";
    write("user alice 5000 5000\ncount-file " + counts + "\n");
    ModuleChain c(std::vector<std::string>{"nscachetest"}, NSCACHE_TEST_NSS_DIR);
    c.passwd_by_name("alice");
    c.passwd_by_uid(5000);
    std::ifstream in(counts);
    std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_EQ(all, "getpwnam_r alice\ngetpwuid_r 5000\n");
    unlink(counts.c_str());
}

// A module folder of its own, where the test module appears only when `install` is called
// (as a package installed after the daemon started).
class LateModule {
  public:
    LateModule() {
        folder_ = ::testing::TempDir() + "nscachetest-late." + std::to_string(getpid()) + "." +
                  std::to_string(next_++);
        std::filesystem::create_directories(folder_);
    }
    ~LateModule() { std::filesystem::remove_all(folder_); }
    const std::string& folder() const { return folder_; }
    void install() {
        std::filesystem::create_symlink(
            std::string(NSCACHE_TEST_NSS_DIR) + "/libnss_nscachetest.so.2",
            folder_ + "/libnss_nscachetest.so.2");
    }

  private:
    static inline int next_ = 0;
    std::string folder_;
};

TEST_F(ModuleChainTest, ANewChainRetriesAModuleThatFailedToLoad) {
    write("user alice 5000 5000\n");
    LateModule late;
    ModuleChain before(std::vector<std::string>{"nscachetest"}, late.folder());
    EXPECT_EQ(before.passwd_by_name("alice").status, Status::not_found);  // skipped
    late.install();
    // A replan (nsswitch.conf changed, INVALIDATE) builds a new chain: it loads it at once.
    ModuleChain after(std::vector<std::string>{"nscachetest"}, late.folder());
    EXPECT_EQ(after.passwd_by_name("alice").status, Status::found);
    EXPECT_EQ(before.passwd_by_name("alice").status, Status::found);  // the library is shared
}

TEST_F(ModuleChainTest, AModuleThatFailedToLoadIsRetriedOnceAMinute) {
    write("user alice 5000 5000\n");
    LateModule late;
    testing::FakeClock clock;
    ModuleChain c(std::vector<std::string>{"nscachetest"}, late.folder(), clock);
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::not_found);
    late.install();
    clock.advance_ms(59'000);
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::not_found);  // not yet: no dlopen
    clock.advance_ms(1'000);
    EXPECT_EQ(c.passwd_by_name("alice").status, Status::found);
    EXPECT_EQ(c.groups_of("alice", 5000).status, Status::not_found);  // loaded for good
}

}  // namespace
}  // namespace nscache::nsdb
