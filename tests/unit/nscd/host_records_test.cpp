// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/host_records.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

namespace nscache::nscd {
namespace {

hostdb::HostAnswer found() {
    hostdb::HostAnswer a;
    a.status = hostdb::HostStatus::Found;
    a.ttl = 60;
    a.canonical = "www.example.test";
    a.aliases = {"alias.example.test"};
    a.ipv4 = {{192, 0, 2, 1}, {192, 0, 2, 2}};
    a.ipv6 = {{0x20, 0x01, 0x0d, 0xb8}};
    return a;
}

template <typename Header>
Header header_of(const std::vector<uint8_t>& reply) {
    Header h;
    EXPECT_GE(reply.size(), sizeof h);
    std::memcpy(&h, reply.data(), sizeof h);
    return h;
}

TEST(HostRecords, HostentAsGlibcsClientReadsIt) {
    const auto reply = host_reply(GETHOSTBYNAME, found());
    const auto h = header_of<HostResponseHeader>(reply);
    EXPECT_EQ(h.version, 2);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.h_name_len, 17);
    EXPECT_EQ(h.h_aliases_cnt, 1);
    EXPECT_EQ(h.h_addrtype, 2);
    EXPECT_EQ(h.h_length, 4);
    EXPECT_EQ(h.h_addr_list_cnt, 2);
    // name, alias lengths, addresses, alias strings
    const uint8_t* p = reply.data() + sizeof h;
    EXPECT_STREQ(reinterpret_cast<const char*>(p), "www.example.test");
    p += 17;
    uint32_t alias_len;
    std::memcpy(&alias_len, p, 4);
    EXPECT_EQ(alias_len, 19u);
    p += 4;
    EXPECT_EQ(p[3], 1);
    EXPECT_EQ(p[7], 2);
    p += 8;
    EXPECT_STREQ(reinterpret_cast<const char*>(p), "alias.example.test");
    EXPECT_EQ(p + 19, reply.data() + reply.size());

    const auto v6 = header_of<HostResponseHeader>(host_reply(GETHOSTBYNAMEv6, found()));
    EXPECT_EQ(v6.h_addrtype, 10);
    EXPECT_EQ(v6.h_length, 16);
    EXPECT_EQ(v6.h_addr_list_cnt, 1);
}

TEST(HostRecords, NegativeHostentsCarryGlibcsHErrno) {
    hostdb::HostAnswer nx;
    nx.status = hostdb::HostStatus::NotFound;
    const auto h = header_of<HostResponseHeader>(host_reply(GETHOSTBYNAME, nx));
    EXPECT_EQ(h.found, 0);
    EXPECT_EQ(h.error, kHostNotFound);
    hostdb::HostAnswer nodata;
    nodata.status = hostdb::HostStatus::NoData;
    EXPECT_EQ(header_of<HostResponseHeader>(host_reply(GETHOSTBYNAME, nodata)).error, kNoData);
    EXPECT_EQ(header_of<HostResponseHeader>(host_disabled_reply()).found, -1);
}

TEST(HostRecords, AddrinfoListsBothFamiliesWithTheirFamilies) {
    const auto reply = ai_reply(found());
    const auto h = header_of<AiResponseHeader>(reply);
    EXPECT_EQ(h.found, 1);
    EXPECT_EQ(h.naddrs, 3);
    EXPECT_EQ(h.addrslen, 4 + 4 + 16);
    EXPECT_EQ(h.canonlen, 17);
    const uint8_t* families = reply.data() + sizeof h + h.addrslen;
    EXPECT_EQ(families[0], 2);
    EXPECT_EQ(families[1], 2);
    EXPECT_EQ(families[2], 10);
    EXPECT_STREQ(reinterpret_cast<const char*>(families + 3), "www.example.test");
    EXPECT_EQ(reply.size(), sizeof h + h.addrslen + h.naddrs + h.canonlen);
}

}  // namespace
}  // namespace nscache::nscd
