// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/user_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace nscache::nscd {
namespace {

template <typename Header>
Header header_of(const std::vector<uint8_t>& r) {
    Header h{};
    EXPECT_GE(r.size(), sizeof h);
    if (r.size() >= sizeof h) std::memcpy(&h, r.data(), sizeof h);
    return h;
}

std::string tail(const std::vector<uint8_t>& r, size_t from) {
    return std::string(reinterpret_cast<const char*>(r.data()) + from, r.size() - from);
}

// nscd/pwdcache.c: the header, then name, passwd, gecos, dir, shell, each with its NUL.
TEST(UserRecords, PasswdIsTheHeaderThenItsFiveStrings) {
    nsdb::PasswdEntry e{"alice", "x", 1000, 100, "Alice", "/home/alice", "/bin/sh"};
    const std::vector<uint8_t> r = passwd_record(&e);
    const auto h = header_of<PwResponseHeader>(r);
    EXPECT_EQ(h.version, kProtocolVersion);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.pw_name_len, 6);
    EXPECT_EQ(h.pw_passwd_len, 2);
    EXPECT_EQ(h.pw_uid, 1000u);
    EXPECT_EQ(h.pw_gid, 100u);
    EXPECT_EQ(h.pw_gecos_len, 6);
    EXPECT_EQ(h.pw_dir_len, 12);
    EXPECT_EQ(h.pw_shell_len, 8);
    EXPECT_EQ(tail(r, sizeof h), std::string("alice\0x\0Alice\0/home/alice\0/bin/sh\0", 34));
    const auto missing = header_of<PwResponseHeader>(passwd_record(nullptr));
    EXPECT_EQ(missing.found, 0);
    EXPECT_EQ(missing.pw_uid, ~0u);  // as nscd's notfound record
}

// nscd/grpcache.c: the header, the members' lengths (uint32, read in place by the client),
// name, passwd, members.
TEST(UserRecords, GroupCarriesTheMemberLengthsBeforeTheStrings) {
    nsdb::GroupEntry e{"staff", "x", 50, {"alice", "bob"}};
    const std::vector<uint8_t> r = group_record(&e);
    const auto h = header_of<GrResponseHeader>(r);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.gr_name_len, 6);
    EXPECT_EQ(h.gr_passwd_len, 2);
    EXPECT_EQ(h.gr_gid, 50u);
    EXPECT_EQ(h.gr_mem_cnt, 2);
    ASSERT_EQ(sizeof h % 4, 0u);  // the lengths stay 4-aligned after the header
    uint32_t lens[2];
    std::memcpy(lens, r.data() + sizeof h, sizeof lens);
    EXPECT_EQ(lens[0], 6u);
    EXPECT_EQ(lens[1], 4u);
    EXPECT_EQ(tail(r, sizeof h + sizeof lens), std::string("staff\0x\0alice\0bob\0", 18));
}

TEST(UserRecords, InitgroupsIsTheCountThenTheGids) {
    const std::vector<uint32_t> gids{27, 100};
    const std::vector<uint8_t> r = initgroups_record(&gids);
    const auto h = header_of<InitgrResponseHeader>(r);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.ngrps, 2);
    ASSERT_EQ(r.size(), sizeof h + 8);
    int32_t g[2];
    std::memcpy(g, r.data() + sizeof h, sizeof g);
    EXPECT_EQ(g[0], 27);
    EXPECT_EQ(g[1], 100);
    EXPECT_EQ(header_of<InitgrResponseHeader>(initgroups_record(nullptr)).found, 0);
}

// nscd/servicescache.c: name and proto come before the aliases' lengths.
TEST(UserRecords, ServiceIsNameProtoThenAliasLengthsThenAliases) {
    nsdb::ServiceEntry e{"http", {"www"}, 20480, "tcp"};
    const std::vector<uint8_t> r = service_record(&e);
    const auto h = header_of<ServResponseHeader>(r);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.s_name_len, 5);
    EXPECT_EQ(h.s_proto_len, 4);
    EXPECT_EQ(h.s_aliases_cnt, 1);
    EXPECT_EQ(h.s_port, 20480);
    ASSERT_EQ(r.size(), sizeof h + 5 + 4 + 4 + 4);
    EXPECT_EQ(tail(r, sizeof h).substr(0, 9), std::string("http\0tcp\0", 9));
    uint32_t len = 0;
    std::memcpy(&len, r.data() + sizeof h + 9, sizeof len);
    EXPECT_EQ(len, 4u);
    EXPECT_EQ(tail(r, sizeof h + 13), std::string("www\0", 4));
    const auto missing = header_of<ServResponseHeader>(service_record(nullptr));
    EXPECT_EQ(missing.found, 0);
    EXPECT_EQ(missing.s_port, -1);
}

TEST(UserRecords, KeysAreWhatTheClientSends) {
    EXPECT_EQ(id_key(0), (std::vector<uint8_t>{'0', 0}));
    EXPECT_EQ(id_key(1000), (std::vector<uint8_t>{'1', '0', '0', '0', 0}));
    EXPECT_EQ(name_key("root"), (std::vector<uint8_t>{'r', 'o', 'o', 't', 0}));
    EXPECT_EQ(parse_id("4294967295"), 4294967295u);
    EXPECT_FALSE(parse_id("4294967296"));
    EXPECT_FALSE(parse_id("-1"));
    EXPECT_FALSE(parse_id("12a"));
    std::string crit;
    std::string proto;
    ASSERT_TRUE(split_service_key("20480/tcp", crit, proto));
    EXPECT_EQ(crit, "20480");
    EXPECT_EQ(proto, "tcp");
    ASSERT_TRUE(split_service_key("http/", crit, proto));
    EXPECT_EQ(proto, "");
}

TEST(UserRecords, DeclinedIsFoundMinusOne) {
    EXPECT_EQ(header_of<PwResponseHeader>(declined_reply(GETPWBYUID)).found, -1);
    EXPECT_EQ(header_of<InitgrResponseHeader>(declined_reply(INITGROUPS)).found, -1);
    EXPECT_EQ(header_of<ServResponseHeader>(declined_reply(GETSERVBYPORT)).found, -1);
}

}  // namespace
}  // namespace nscache::nscd
