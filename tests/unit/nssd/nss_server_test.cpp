// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/nss_server.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include <cstring>
#include <string>
#include <vector>

#include "front/front_test_support.h"
#include "upstream/upstream_test_support.h"

namespace nscache::nssd {
namespace {

using front::testing::connect_as_child;
using front::testing::FrontHarness;
using front::testing::held;
using front::testing::read_reply;
using front::testing::send_all;

std::vector<uint8_t> request(uint16_t op, int32_t family, const std::string& data,
                             uint32_t magic = NSCACHE_NSS_REQUEST_MAGIC) {
    nscache_nss_request header{};
    header.magic = magic;
    header.version = NSCACHE_NSS_VERSION;
    header.op = op;
    header.family = family;
    header.data_len = static_cast<uint32_t>(data.size());
    // Sized once and filled with memcpy: g++ 12 -O2 warns (-Warray-bounds, a false positive)
    // on insert() after a vector of exactly sizeof header.
    std::vector<uint8_t> bytes(sizeof header + data.size());
    std::memcpy(bytes.data(), &header, sizeof header);
    if (!data.empty()) std::memcpy(bytes.data() + sizeof header, data.data(), data.size());
    return bytes;
}

struct NssHarness {
    explicit NssHarness(size_t max_per_user = 256,
                        std::optional<SocketAddress> upstream = std::nullopt,
                        uint32_t max_upstream_queries = 4096)
        : h("192.0.2.1 one one-alias\n", upstream, max_upstream_queries),
          nss(h.front, NssOptions{.socket_path = h.socket_path("nss.sock"),
                                  .max_connections_per_user = max_per_user}) {
        const Result<void> opened = nss.open();
        EXPECT_TRUE(opened) << (opened ? "" : opened.error());
        h.front.run_on_this_thread();
    }
    std::string path() const { return h.socket_path("nss.sock"); }

    // Sends `bytes` on a new connection and returns the whole reply ("" if closed without).
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
    NssServer nss;
};

nscache_nss_response header_of(const std::vector<uint8_t>& reply) {
    nscache_nss_response r{};
    EXPECT_GE(reply.size(), sizeof r);
    if (reply.size() >= sizeof r) std::memcpy(&r, reply.data(), sizeof r);
    return r;
}

TEST(NssServer, AnswersANameFromTheHostsFile) {
    NssHarness n;
    bool closed = false;
    const std::vector<uint8_t> reply = n.ask(request(NSCACHE_NSS_BY_NAME, 2, "one"), &closed);
    EXPECT_TRUE(closed);  // one request, one response
    const nscache_nss_response r = header_of(reply);
    EXPECT_EQ(r.magic, NSCACHE_NSS_RESPONSE_MAGIC);
    EXPECT_EQ(r.status, NSCACHE_NSS_FOUND);
    EXPECT_EQ(r.family, 2);
    EXPECT_EQ(reply.size(), sizeof r + r.payload_len);
    // The payload carries 192.0.2.1 (after the name and the alias).
    const uint8_t address[] = {192, 0, 2, 1};
    EXPECT_NE(std::search(reply.begin() + sizeof r, reply.end(), address, address + 4),
              reply.end());
    EXPECT_EQ(n.h.counters.nss_requests.load(), 1u);
}

TEST(NssServer, AMalformedRequestIsAnsweredUnavail) {
    NssHarness n;
    const nscache_nss_response r = header_of(n.ask(request(NSCACHE_NSS_BY_ADDR, 2, "xyz")));
    EXPECT_EQ(r.status, NSCACHE_NSS_UNAVAIL);
}

TEST(NssServer, BadMagicClosesTheConnectionWithoutAWord) {
    NssHarness n;
    bool closed = false;
    EXPECT_TRUE(n.ask(request(NSCACHE_NSS_BY_NAME, 2, "one", 0x12345678u), &closed).empty());
    EXPECT_TRUE(closed);
}

TEST(NssServer, AConnectionThatSendsNothingIsClosedAtItsDeadline) {
    NssHarness n;
    const int fd = connect_as_child(n.path());
    ASSERT_GE(fd, 0);
    n.h.turns();
    n.h.clock.advance_ms(9'999);
    n.h.turns();
    EXPECT_TRUE(held(fd));
    n.h.clock.advance_ms(1);
    n.h.turns();
    EXPECT_FALSE(held(fd));
    close(fd);
}

// max-connections-per-user: a user's idle clients beyond it are closed at accept.
TEST(NssServer, OneUserHoldsAtMostItsShareOfTheSocket) {
    NssHarness n(/*max_per_user=*/3);
    const uid_t user = geteuid() == 0 ? 65534 : static_cast<uid_t>(-1);
    std::vector<int> clients;
    for (int i = 0; i < 5; ++i) {
        clients.push_back(connect_as_child(n.path(), user));
        ASSERT_GE(clients.back(), 0);
    }
    n.h.turns();
    size_t kept = 0;
    for (int fd : clients) kept += held(fd);
    EXPECT_EQ(kept, 3u);
    for (int fd : clients) close(fd);
}

// The map hands out over the socket is flushed once per hosts file edit (it was twice: both
// fronts watched the file), and not at all for a rewrite with the same bytes.
TEST(NssServer, AHostsFileEditInvalidatesTheMapOnce) {
    NssHarness n;
    const uint32_t before = n.nss.map_generation();
    front::testing::write_file(n.h.hosts_path(), "192.0.2.9 one\n");
    n.h.turns();
    EXPECT_EQ(n.nss.map_generation(), before + 1);
    front::testing::write_file(n.h.hosts_path(), "192.0.2.9 one\n");
    n.h.turns();
    EXPECT_EQ(n.nss.map_generation(), before + 1);
    const std::vector<uint8_t> reply = n.ask(request(NSCACHE_NSS_BY_NAME, 2, "one"));
    const uint8_t address[] = {192, 0, 2, 9};
    EXPECT_NE(std::search(reply.begin(), reply.end(), address, address + 4), reply.end());
}

TEST(NssServer, GetMapPassesTheMapsDescriptor) {
    NssHarness n;
    const int fd = connect_as_child(n.path());
    ASSERT_GE(fd, 0);
    send_all(fd, request(NSCACHE_NSS_GET_MAP, 0, ""));
    n.h.turns();
    nscache_nss_response r{};
    uint8_t size[8];
    iovec iov[2] = {{&r, sizeof r}, {size, sizeof size}};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = iov;
    msg.msg_iovlen = 2;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ASSERT_EQ(recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC),
              static_cast<ssize_t>(sizeof r + sizeof size));
    EXPECT_EQ(r.status, NSCACHE_NSS_FOUND);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    ASSERT_NE(c, nullptr);
    int map_fd = -1;
    std::memcpy(&map_fd, CMSG_DATA(c), sizeof map_fd);
    EXPECT_GE(map_fd, 0);
    close(map_fd);
    close(fd);
}

// Review finding 2: an NSS request outlives its connection (the answer is still published in
// the map). A user who asks and hangs up, again and again, holds no connection, so the
// connection share alone let its requests pile up until they held every upstream query the
// front has: then every other user's lookups failed. Such a request counts against its user
// until it ends, so that user's share of the lookups in flight is all it can take.
TEST(NssServer, RequestsOfClosedConnectionsStillCountAgainstTheirUser) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (clients of two other users)";
    upstream::testing::ManualUpstream upstream;
    NssHarness n(/*max_per_user=*/2, upstream.address, /*max_upstream_queries=*/16);
    for (int i = 0; i < 12; ++i) {
        const int fd = connect_as_child(n.path(), 65534);
        ASSERT_GE(fd, 0);
        send_all(fd, request(NSCACHE_NSS_BY_NAME, 0, "flood" + std::to_string(i) + ".test"));
        n.h.turns(2);
        close(fd);  // asked, and gone
        n.h.turns(2);
    }
    const int fd = connect_as_child(n.path(), 65533);
    ASSERT_GE(fd, 0);
    send_all(fd, request(NSCACHE_NSS_BY_NAME, 2, "victim.test"));
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
    EXPECT_EQ(header_of(reply).status, NSCACHE_NSS_FOUND);
}

}  // namespace
}  // namespace nscache::nssd
