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
#include "upstream/upstream_test_support.h"

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
    o.users.passwd = o.users.group = o.users.services = DbPolicy::decline;
    o.max_connections_per_user = max_per_user;
    o.map = MapOptions{.module = 211, .data_size = 1u << 20, .certainly_running = false};
    return o;
}

struct NscdHarness {
    explicit NscdHarness(size_t max_per_user = 256,
                         std::optional<SocketAddress> upstream = std::nullopt,
                         uint32_t max_upstream_queries = 4096)
        : h("192.0.2.1 one one-alias\n", upstream, max_upstream_queries),
          nscd(h.front, options_for(h, max_per_user)) {
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

// Review finding 2, on the socket every program asks first: a user who asks and hangs up again
// and again, then asks on open connections, gets no more than its share of the lookups in
// flight. Past it, a lookup is closed without a reply at once (glibc's client asks NSS itself),
// never held; another user's lookup still goes upstream and is answered.
TEST(NscdServer, OneUserCannotTakeAnotherUsersLookups) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (clients of two other users)";
    upstream::testing::ManualUpstream upstream;
    NscdHarness n(/*max_per_user=*/4, upstream.address, /*max_upstream_queries=*/16);
    for (int i = 0; i < 12; ++i) {
        const int fd = connect_as_child(n.path(), 65534);
        ASSERT_GE(fd, 0);
        send_all(fd, request(GETAI, "flood" + std::to_string(i) + ".test"));
        n.h.turns(2);
        close(fd);  // asked, and gone
        n.h.turns(2);
    }
    const int over = connect_as_child(n.path(), 65534);  // within its connections, past its lookups
    ASSERT_GE(over, 0);
    send_all(over, request(GETHOSTBYNAME, "more.test"));
    n.h.turns();
    bool closed = false;
    EXPECT_TRUE(read_reply(over, &closed).empty());
    EXPECT_TRUE(closed) << "held instead of told to ask NSS";
    close(over);

    const int fd = connect_as_child(n.path(), 65533);
    ASSERT_GE(fd, 0);
    send_all(fd, request(GETHOSTBYNAME, "victim.test"));
    n.h.turns();  // asked before any upstream answers: the flood is still in flight
    std::vector<uint8_t> reply;
    for (int i = 0; i < 400 && reply.empty(); ++i) {
        n.h.front.run_once(5);
        while (auto query = upstream.take_udp()) {
            upstream.reply_udp(*query, upstream::testing::answer_to(
                                           query->msg, 0, 1, upstream::testing::a_record(300, 7)));
        }
        reply = read_reply(fd);
    }
    close(fd);
    EXPECT_EQ(host_header(reply).found, 1);
}

}  // namespace
}  // namespace nscache::nscd
