// SPDX-License-Identifier: BSD-3-Clause
#include "server/udp_socket.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <string>

#include "server_test_support.h"

namespace nscache::server {
namespace {

using testing::loopback_client;
using testing::loopback_socket;
using testing::recv_now;
using testing::ServerHarness;
using testing::WireBuilder;

std::vector<uint8_t> query(std::string_view name, uint16_t qtype, uint16_t id) {
    WireBuilder b;
    b.header(id, dns::flag::RD, 1).question(name, qtype);
    return b.bytes;
}

uint16_t id_of(const std::vector<uint8_t>& msg) {
    return dns::read_u16(msg.data());
}

int rcode_of(const std::vector<uint8_t>& msg) {
    return msg[3] & 0x0F;
}

// A worker's UDP socket on 127.0.0.1 over the harness's pipeline, and one client.
struct UdpFixture {
    UdpFixture()
        : server_fd(loopback_socket(SOCK_DGRAM, &port)), socket(server_fd, 0, h.pipeline, 1232) {
        client = loopback_client(SOCK_DGRAM, port);
        socklen_t len = sizeof client_address;
        getsockname(client, reinterpret_cast<sockaddr*>(&client_address), &len);
        client_len = len;
    }
    ~UdpFixture() { close(client); }

    void send_query(const std::vector<uint8_t>& q) const {
        ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    }
    // Everything the client has received now.
    std::vector<std::vector<uint8_t>> received() const {
        std::vector<std::vector<uint8_t>> out;
        while (auto d = recv_now(client)) out.push_back(std::move(*d));
        return out;
    }

    ServerHarness h;
    uint16_t port = 0;
    int server_fd;
    UdpSocket socket;  // owns server_fd
    int client = -1;
    sockaddr_storage client_address{};
    socklen_t client_len = 0;
};

TEST(UdpSocket, ABatchOfHitsIsAnsweredInOneEvent) {
    UdpFixture f;
    f.h.cache_a("www.example.test");
    for (uint16_t id = 1; id <= 5; ++id) f.send_query(query("www.example.test", dns::rtype::A, id));
    f.socket.on_event(EPOLLIN);
    const auto answers = f.received();
    ASSERT_EQ(answers.size(), 5u);
    std::set<uint16_t> ids;
    for (const auto& a : answers) {
        ids.insert(id_of(a));
        EXPECT_EQ(rcode_of(a), 0);
        EXPECT_EQ(dns::read_u16(a.data() + 6), 1u);  // ANCOUNT: the cached A record
    }
    EXPECT_EQ(ids, (std::set<uint16_t>{1, 2, 3, 4, 5}));
    EXPECT_EQ(f.h.counters.cache_hits.load(), 5u);
    EXPECT_TRUE(f.h.forwarder.resolved.empty());
}

// Malformed queries get FORMERR with their ID, as today; a response is not answered at all
// (answering it would let two servers play ping-pong).
TEST(UdpSocket, MalformedQueryIsFormErrAndAResponseIsDropped) {
    UdpFixture f;
    WireBuilder header_only;
    header_only.header(0x0BAD, dns::flag::RD, 1);  // QDCOUNT 1, no question
    f.send_query(header_only.bytes);
    WireBuilder response;
    response.header(0x0BEE, dns::flag::QR | dns::flag::RD, 1).question("x.example.test", 1);
    f.send_query(response.bytes);
    f.socket.on_event(EPOLLIN);
    const auto answers = f.received();
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(id_of(answers[0]), 0x0BAD);
    EXPECT_EQ(rcode_of(answers[0]), static_cast<int>(dns::Rcode::FormErr));
    EXPECT_EQ(f.h.counters.answers_formerr.load(), 1u);
    EXPECT_TRUE(f.h.forwarder.resolved.empty());
}

// A datagram longer than any query is cut by the kernel (MSG_TRUNC): parsing what is left
// would answer a question the client never asked. It is dropped; the next query is not.
TEST(UdpSocket, OversizedDatagramIsDroppedAndTheNextQueryAnswered) {
    UdpFixture f;
    f.h.cache_a("www.example.test");
    auto big = query("www.example.test", dns::rtype::A, 7);
    big.resize(5000, 0);
    f.send_query(big);
    f.send_query(query("www.example.test", dns::rtype::A, 8));
    f.socket.on_event(EPOLLIN);
    const auto answers = f.received();
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(id_of(answers[0]), 8);
}

// A miss is answered later (the pipeline's send_reply): queued by send_later, sent when the
// loop's turn ends (flush_later_replies), never before.
TEST(UdpSocket, LaterRepliesWaitForTheFlush) {
    UdpFixture f;
    f.send_query(query("miss.example.test", dns::rtype::A, 3));
    f.socket.on_event(EPOLLIN);
    EXPECT_TRUE(f.received().empty());
    ASSERT_EQ(f.h.forwarder.resolved.size(), 1u);
    const auto reply = query("miss.example.test", dns::rtype::A, 3);
    f.socket.send_later(reinterpret_cast<const sockaddr*>(&f.client_address), f.client_len, reply);
    EXPECT_TRUE(f.received().empty());
    f.socket.flush_later_replies();
    const auto answers = f.received();
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0], reply);
    f.socket.flush_later_replies();  // nothing left: nothing sent twice
    EXPECT_TRUE(f.received().empty());
}

// More later replies than one sendmmsg batch: the full batch goes out at once, the rest at
// the flush; none is lost.
TEST(UdpSocket, LaterRepliesOverABatchAreAllSent) {
    UdpFixture f;
    for (uint16_t id = 0; id < 40; ++id) {
        f.socket.send_later(reinterpret_cast<const sockaddr*>(&f.client_address), f.client_len,
                            query("x.example.test", dns::rtype::A, id));
    }
    EXPECT_EQ(f.received().size(), 32u);  // the first batch, sent when the 33rd came
    f.socket.flush_later_replies();
    EXPECT_EQ(f.received().size(), 8u);
}

// An answer larger than the socket's answer buffer is not queued (it would overrun it).
TEST(UdpSocket, LaterReplyLargerThanTheAnswerBufferIsDropped) {
    UdpFixture f;
    std::vector<uint8_t> huge(2000, 0);
    f.socket.send_later(reinterpret_cast<const sockaddr*>(&f.client_address), f.client_len, huge);
    f.socket.flush_later_replies();
    EXPECT_TRUE(f.received().empty());
}

}  // namespace
}  // namespace nscache::server
