// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/nscd_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

#include "front/front_test_support.h"

namespace nscache::nscd {
namespace {

using front::testing::connect_as_child;
using front::testing::FrontHarness;
using front::testing::held;
using front::testing::read_reply;
using front::testing::send_all;

std::vector<uint8_t> request(RequestType type, const std::string& key_text,
                             int32_t version = kProtocolVersion) {
    std::vector<uint8_t> key(key_text.begin(), key_text.end());
    key.push_back(0);  // a string key counts its NUL
    RequestHeader header{version, type, static_cast<int32_t>(key.size())};
    // Sized once and filled with memcpy: g++ 12 -O2 warns (-Warray-bounds, a false positive)
    // on insert() after a vector of exactly sizeof header.
    std::vector<uint8_t> bytes(sizeof header + key.size());
    std::memcpy(bytes.data(), &header, sizeof header);
    if (!key.empty()) std::memcpy(bytes.data() + sizeof header, key.data(), key.size());
    return bytes;
}

NscdOptions options_for(const FrontHarness& h, size_t max_per_user = 256) {
    NscdOptions o;
    o.socket_path = h.socket_path("nscd.sock");
    o.proxy_other_databases = false;  // no helper threads (and no fork under them)
    o.max_connections_per_user = max_per_user;
    o.map = MapOptions{.module = 211, .data_size = 1u << 20, .certainly_running = false};
    return o;
}

struct NscdHarness {
    explicit NscdHarness(size_t max_per_user = 256) : nscd(h.front, options_for(h, max_per_user)) {
        const Result<void> opened = nscd.open();
        EXPECT_TRUE(opened) << (opened ? "" : opened.error());
        h.front.run_on_this_thread();
    }
    ~NscdHarness() { h.front.stop(); }  // the map's shutdown, as at the daemon's
    std::string path() const { return h.socket_path("nscd.sock"); }

    // A request from another process (the daemon declines its own), and the whole reply.
    std::vector<uint8_t> ask(const std::vector<uint8_t>& bytes, bool* closed = nullptr) {
        const int fd = connect_as_child(path());
        EXPECT_GE(fd, 0);
        send_all(fd, bytes);
        h.turns();
        std::vector<uint8_t> reply = read_reply(fd, closed);
        close(fd);
        return reply;
    }

    FrontHarness h;
    NscdServer nscd;
};

HostResponseHeader host_header(const std::vector<uint8_t>& reply) {
    HostResponseHeader r{};
    EXPECT_GE(reply.size(), sizeof r);
    if (reply.size() >= sizeof r) std::memcpy(&r, reply.data(), sizeof r);
    return r;
}

TEST(NscdServer, AnswersGethostbynameFromTheHostsFileAndPublishesIt) {
    NscdHarness n;
    bool closed = false;
    const std::vector<uint8_t> reply = n.ask(request(GETHOSTBYNAME, "one"), &closed);
    EXPECT_TRUE(closed);
    const HostResponseHeader r = host_header(reply);
    EXPECT_EQ(r.version, kProtocolVersion);
    EXPECT_EQ(r.found, 1);
    EXPECT_EQ(r.h_addrtype, 2);
    EXPECT_EQ(r.h_addr_list_cnt, 1);
    const uint8_t address[] = {192, 0, 2, 1};
    EXPECT_NE(std::search(reply.begin(), reply.end(), address, address + 4), reply.end());
    EXPECT_EQ(n.nscd.map_entries(), 1u);  // the next lookup of it needs no socket
    EXPECT_EQ(n.h.counters.nscd_requests.load(), 1u);
}

// glibc's client asks nscd in every process, the daemon's own included: those are declined.
TEST(NscdServer, TheDaemonsOwnLookupsAreNotServed) {
    NscdHarness n;
    const int self = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, n.path().c_str(), n.path().size() + 1);
    ASSERT_EQ(connect(self, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    send_all(self, request(GETHOSTBYNAME, "one"));
    n.h.turns();
    const HostResponseHeader r = host_header(read_reply(self));
    EXPECT_EQ(r.found, -1);  // "not served here"
    EXPECT_EQ(n.nscd.map_entries(), 0u);
    close(self);
}

TEST(NscdServer, AnotherProtocolVersionClosesTheConnectionWithoutAWord) {
    NscdHarness n;
    bool closed = false;
    EXPECT_TRUE(n.ask(request(GETHOSTBYNAME, "one", 1), &closed).empty());
    EXPECT_TRUE(closed);
}

// A client waits 5 s: one still unanswered just before is closed, so it asks NSS at once.
TEST(NscdServer, AConnectionThatSendsNothingIsClosedBeforeTheClientGivesUp) {
    NscdHarness n;
    const int fd = connect_as_child(n.path());
    ASSERT_GE(fd, 0);
    n.h.turns();
    n.h.clock.advance_ms(kClientTimeoutMs - 501);
    n.h.turns();
    EXPECT_TRUE(held(fd));
    n.h.clock.advance_ms(1);
    n.h.turns();
    EXPECT_FALSE(held(fd));
    close(fd);
}

TEST(NscdServer, OneUserHoldsAtMostItsShareOfTheSocket) {
    NscdHarness n(/*max_per_user=*/2);
    const uid_t user = geteuid() == 0 ? 65534 : static_cast<uid_t>(-1);
    std::vector<int> clients;
    for (int i = 0; i < 4; ++i) {
        clients.push_back(connect_as_child(n.path(), user));
        ASSERT_GE(clients.back(), 0);
    }
    n.h.turns();
    size_t kept = 0;
    for (int fd : clients) kept += held(fd);
    EXPECT_EQ(kept, 2u);
    for (int fd : clients) close(fd);
}

// One edit of /etc/hosts flushes the map once (one new empty map), and the next answer
// comes from the new file.
TEST(NscdServer, AHostsFileEditFlushesTheMapOnce) {
    NscdHarness n;
    n.ask(request(GETHOSTBYNAME, "one"));
    ASSERT_EQ(n.nscd.map_entries(), 1u);
    const uint64_t rotations = n.nscd.map_rotations();
    front::testing::write_file(n.h.hosts_path(), "192.0.2.9 one\n");
    n.h.turns();
    EXPECT_EQ(n.nscd.map_rotations(), rotations + 1);
    EXPECT_EQ(n.nscd.map_entries(), 0u);
    front::testing::write_file(n.h.hosts_path(), "192.0.2.9 one\n");  // the same bytes
    n.h.turns();
    EXPECT_EQ(n.nscd.map_rotations(), rotations + 1);
    const std::vector<uint8_t> reply = n.ask(request(GETHOSTBYNAME, "one"));
    const uint8_t address[] = {192, 0, 2, 9};
    EXPECT_NE(std::search(reply.begin(), reply.end(), address, address + 4), reply.end());
}

// INVALIDATE is root's: anyone else's is closed unanswered.
TEST(NscdServer, InvalidateIsRootsOnly) {
    NscdHarness n;
    n.ask(request(GETHOSTBYNAME, "one"));
    ASSERT_EQ(n.nscd.map_entries(), 1u);
    if (geteuid() == 0) {
        const int fd = connect_as_child(n.path(), 65534);
        ASSERT_GE(fd, 0);
        send_all(fd, request(INVALIDATE, "hosts"));
        n.h.turns();
        EXPECT_TRUE(read_reply(fd).empty());
        close(fd);
        EXPECT_EQ(n.nscd.map_entries(), 1u);
    }
    if (geteuid() != 0) GTEST_SKIP() << "INVALIDATE as root needs root";
    EXPECT_EQ(n.ask(request(INVALIDATE, "hosts")).size(), sizeof(int32_t));
    EXPECT_EQ(n.nscd.map_entries(), 0u);
}

}  // namespace
}  // namespace nscache::nscd
