// SPDX-License-Identifier: BSD-3-Clause
#include "nsdb/nsswitch.h"

#include <gtest/gtest.h>

namespace nscache::nsdb {
namespace {

SourcePlan plan_of(const char* text, const char* db = "passwd", size_t compat = 0) {
    return plan_for(NsswitchConf::parse(text).line(db), compat);
}

TEST(Nsswitch, ParsesLinesCommentsAndActions) {
    NsswitchConf c = NsswitchConf::parse(
        "# /etc/nsswitch.conf\n"
        "passwd:         files systemd   # Debian 12\n"
        "group:files [notfound=Return]ldap\n"
        "hosts: files dns\n"
        "garbage\n"
        "services  files\n"  // glibc takes white space for the colon
        "netgroup: nis [!UNAVAIL=return] files\n");
    SwitchLine p = c.line("passwd");
    EXPECT_TRUE(p.present);
    EXPECT_FALSE(p.has_actions);
    EXPECT_EQ(p.services, (std::vector<std::string>{"files", "systemd"}));
    SwitchLine g = c.line("group");
    EXPECT_TRUE(g.has_actions);
    EXPECT_EQ(g.services, (std::vector<std::string>{"files", "ldap"}));
    EXPECT_EQ(c.line("services").services, (std::vector<std::string>{"files"}));
    EXPECT_TRUE(c.line("netgroup").has_actions);
    EXPECT_EQ(c.line("netgroup").services, (std::vector<std::string>{"nis", "files"}));
}

TEST(Nsswitch, LastLineWinsAndBadActionsMeanProxy) {
    NsswitchConf c = NsswitchConf::parse("passwd: ldap\npasswd: files\ngroup: files [BOGUS=x]\n");
    EXPECT_EQ(c.line("passwd").services, (std::vector<std::string>{"files"}));
    EXPECT_TRUE(c.line("group").has_actions);
    EXPECT_EQ(plan_for(c.line("group"), 0).plan, Plan::proxy);
    EXPECT_EQ(plan_of("group: files [SUCCESS=return\n", "group").plan, Plan::proxy);
}

TEST(Nsswitch, MissingLinesAreGlibcDefaults) {
    NsswitchConf c = NsswitchConf::parse("hosts: files dns\n");
    for (const char* db : {"passwd", "group", "services", "netgroup"}) {
        SwitchLine l = c.line(db);
        EXPECT_FALSE(l.present) << db;
        EXPECT_EQ(l.services, (std::vector<std::string>{"files"})) << db;
        EXPECT_EQ(plan_for(l, 0).plan, Plan::files_only) << db;
    }
    std::string error;
    auto missing = NsswitchConf::read("/nonexistent/nsswitch.conf", error);
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->line("passwd").services, (std::vector<std::string>{"files"}));
}

TEST(Nsswitch, InitgroupsFallsBackToGroupAndMerges) {
    NsswitchConf without = NsswitchConf::parse("group: files systemd\n");
    SwitchLine i = without.line("initgroups");
    EXPECT_TRUE(i.present);
    EXPECT_TRUE(i.merge_groups);
    EXPECT_EQ(i.services, (std::vector<std::string>{"files", "systemd"}));
    EXPECT_FALSE(without.line("group").merge_groups);

    NsswitchConf with = NsswitchConf::parse("group: files systemd\ninitgroups: files sss\n");
    SwitchLine own = with.line("initgroups");
    EXPECT_FALSE(own.merge_groups);
    EXPECT_EQ(own.services, (std::vector<std::string>{"files", "sss"}));

    SwitchLine neither = NsswitchConf::parse("").line("initgroups");
    EXPECT_FALSE(neither.present);
    EXPECT_TRUE(neither.merge_groups);
    EXPECT_EQ(neither.services, (std::vector<std::string>{"files"}));
}

TEST(Nsswitch, Plans) {
    EXPECT_EQ(plan_of("passwd: files\n").plan, Plan::files_only);
    SourcePlan debian = plan_of("passwd: files systemd\n");
    EXPECT_EQ(debian.plan, Plan::files_then_modules);
    EXPECT_EQ(debian.modules, (std::vector<std::string>{"systemd"}));
    EXPECT_EQ(plan_of("passwd: compat\n").plan, Plan::files_only);
    EXPECT_EQ(plan_of("passwd: compat\n", "passwd", 2).plan, Plan::proxy);
    EXPECT_EQ(plan_of("passwd: files [NOTFOUND=return] ldap\n").plan, Plan::proxy);
    EXPECT_EQ(plan_of("passwd: sss files\n").plan, Plan::proxy);
    EXPECT_EQ(plan_of("passwd:\n").plan, Plan::proxy);
    EXPECT_EQ(plan_of("passwd: files files\n").plan, Plan::files_only);
    SourcePlan mixed = plan_of("passwd: files sss files systemd\n");
    EXPECT_EQ(mixed.modules, (std::vector<std::string>{"sss", "systemd"}));
    // compat after files over +/- lines: files answered the plain lines; compat the rest.
    SourcePlan compat = plan_of("passwd: files compat\n", "passwd", 1);
    EXPECT_EQ(compat.plan, Plan::files_then_modules);
    EXPECT_EQ(compat.modules, (std::vector<std::string>{"compat"}));
    EXPECT_EQ(plan_of("passwd: files compat\n").plan, Plan::files_only);
}

}  // namespace
}  // namespace nscache::nsdb
