// SPDX-License-Identifier: BSD-3-Clause
#include "server/tcp_connection.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <set>
#include <string>

#include "server_test_support.h"

namespace nscache::server {
namespace {

using testing::read_messages;
using testing::ServerHarness;
using testing::tcp_query;
using testing::WireBuilder;
using testing::write_all;

uint16_t id_of(const std::vector<uint8_t>& msg) {
    return dns::read_u16(msg.data());
}

TEST(TcpConnection, PipelinedHitsAreAnsweredInOrder) {
    ServerHarness h;
    h.cache_a("www.example.test");
    const int client = h.connect_client();
    std::vector<uint8_t> burst;
    for (uint16_t id = 1; id <= 10; ++id) {
        auto q = tcp_query("www.example.test", dns::rtype::A, id);
        burst.insert(burst.end(), q.begin(), q.end());
    }
    write_all(client, burst);
    h.run_for(5);
    std::vector<uint8_t> buffer;
    auto answers = read_messages(client, buffer);
    ASSERT_EQ(answers.size(), 10u);
    for (uint16_t i = 0; i < 10; ++i) EXPECT_EQ(id_of(answers[i]), i + 1);
    close(client);
}

TEST(TcpConnection, MissesAreAnsweredOutOfOrderWhenTheirAnswersArrive) {
    ServerHarness h;
    const int client = h.connect_client();
    auto a = tcp_query("a.example.test", dns::rtype::A, 1);
    auto b = tcp_query("b.example.test", dns::rtype::A, 2);
    a.insert(a.end(), b.begin(), b.end());
    write_all(client, a);
    h.run_for(3);
    ASSERT_EQ(h.forwarder.resolved.size(), 2u);
    // The second question's answer comes first (SERVFAIL outcomes: no answer object).
    h.pipeline.deliver(h.forwarder.resolved[1].cookie, {});
    h.pipeline.deliver(h.forwarder.resolved[0].cookie, {});
    h.run_for(2);
    std::vector<uint8_t> buffer;
    auto answers = read_messages(client, buffer);
    ASSERT_EQ(answers.size(), 2u);
    EXPECT_EQ(id_of(answers[0]), 2);
    EXPECT_EQ(id_of(answers[1]), 1);
    close(client);
}

// The crash of the audit: an answer delivered while process_buffer() was still handling the
// query handled that query again, recursively, until the stack overflowed. Whatever the
// forwarder does, each query is handled once and answered once.
TEST(TcpConnection, AnswerDeliveredFromInsideHandleIsNotReentered) {
    ServerHarness h;
    h.forwarder.answer_inside_resolve = [&h](uint64_t cookie) { h.pipeline.deliver(cookie, {}); };
    const int client = h.connect_client();
    std::vector<uint8_t> burst;
    for (uint16_t id = 1; id <= 50; ++id) {
        auto q = tcp_query("miss" + std::to_string(id) + ".example.test", dns::rtype::A, id);
        burst.insert(burst.end(), q.begin(), q.end());
    }
    write_all(client, burst);
    h.run_for(10);
    std::vector<uint8_t> buffer;
    auto answers = read_messages(client, buffer);
    EXPECT_EQ(h.forwarder.resolved.size(), 50u);
    ASSERT_EQ(answers.size(), 50u);
    std::set<uint16_t> ids;
    for (const auto& m : answers) ids.insert(id_of(m));
    EXPECT_EQ(ids.size(), 50u);
    close(client);
}

TEST(TcpConnection, OverloadedForwarderMeansServfailAtOnce) {
    ServerHarness h;
    h.forwarder.accept = false;
    const int client = h.connect_client();
    write_all(client, tcp_query("x.example.test", dns::rtype::A, 7));
    h.run_for(3);
    std::vector<uint8_t> buffer;
    auto answers = read_messages(client, buffer);
    ASSERT_EQ(answers.size(), 1u);
    EXPECT_EQ(answers[0][3] & 0x0F, static_cast<int>(dns::Rcode::ServFail));
    close(client);
}

// Slowloris: a byte at a time used to reset the idle timer forever. A query must be complete
// within the read timeout of its first byte.
TEST(TcpConnection, TricklingQueryIsCutOffAtTheReadTimeout) {
    ServerHarness h(testing::test_config(),
                    TcpLimits{.idle_timeout_ms = 60'000, .read_timeout_ms = 100});
    const int client = h.connect_client();
    const auto query = tcp_query("www.example.test", dns::rtype::A, 1);
    bool eof = false;
    std::vector<uint8_t> buffer;
    size_t sent = 0;
    // A byte every 40 ms: the query would take well over a second to complete.
    while (!eof && sent < query.size() - 1) {
        if (send(client, &query[sent], 1, MSG_NOSIGNAL) == 1) ++sent;
        for (int i = 0; i < 4 && !eof; ++i) {
            h.run_for(1, 10);
            read_messages(client, buffer, &eof);
        }
    }
    EXPECT_TRUE(eof) << "the connection stayed open while the query trickled in";
    EXPECT_LT(sent, query.size() - 1);
    close(client);
}

TEST(TcpConnection, IdleConnectionIsClosedAtItsTimeoutAndNotBefore) {
    ServerHarness h(testing::test_config(), TcpLimits{.idle_timeout_ms = 50});
    const int client = h.connect_client();
    bool eof = false;
    std::vector<uint8_t> buffer;
    h.run_for(1, 45);
    read_messages(client, buffer, &eof);
    EXPECT_FALSE(eof) << "closed 45 ms into a 50 ms idle timeout";
    EXPECT_EQ(h.tcp.size(), 1u);
    h.run_for(1, 10);
    read_messages(client, buffer, &eof);
    EXPECT_TRUE(eof);
    h.run_for(1);  // the closed connection is destroyed on the next turn
    EXPECT_EQ(h.tcp.size(), 0u);
    EXPECT_EQ(h.shared.tcp.connections.load(), 0u);
    close(client);
}

// Only a whole query (or answer) resets the idle timer.
TEST(TcpConnection, AQueryAnsweredResetsTheIdleTimer) {
    ServerHarness h(testing::test_config(), TcpLimits{.idle_timeout_ms = 50});
    h.cache_a("www.example.test");
    const int client = h.connect_client();
    bool eof = false;
    std::vector<uint8_t> buffer;
    h.run_for(1, 40);
    write_all(client, tcp_query("www.example.test", dns::rtype::A, 9));
    h.run_for(1, 0);
    ASSERT_EQ(read_messages(client, buffer, &eof).size(), 1u);
    h.run_for(1, 40);  // 80 ms since it connected, 40 since the query
    read_messages(client, buffer, &eof);
    EXPECT_FALSE(eof);
    h.run_for(1, 15);
    read_messages(client, buffer, &eof);
    EXPECT_TRUE(eof);
    close(client);
}

TEST(TcpConnection, GlobalCapRefusesTheConnectionOverIt) {
    ServerHarness h(testing::test_config(), TcpLimits{.max_connections = 2});
    const int a = h.connect_client(1);
    const int b = h.connect_client(2);
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    EXPECT_FALSE(h.tcp.adopt(fds[0], testing::loopback_peer(3), sizeof(sockaddr_in)));
    // Refused means closed: the client sees the end at once.
    char c;
    EXPECT_EQ(recv(fds[1], &c, 1, 0), 0);
    close(fds[1]);
    EXPECT_EQ(h.shared.tcp.connections.load(), 2u);
    close(a);
    close(b);
}

// A client that asks and never reads may not make the daemon queue its answers without bound.
TEST(TcpConnection, ClientThatNeverReadsIsDisconnectedAndItsBytesReleased) {
    ServerHarness h;
    const int client = h.connect_client();
    // Keep the socket's own buffers small, so unread answers pile up in the daemon.
    int small = 4096;
    setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    std::vector<uint8_t> burst;
    for (uint16_t id = 1; id <= 60; ++id) {
        auto q = tcp_query("big" + std::to_string(id) + ".example.test", dns::rtype::TXT, id);
        burst.insert(burst.end(), q.begin(), q.end());
    }
    write_all(client, burst);
    h.run_for(5);
    ASSERT_EQ(h.forwarder.resolved.size(), 60u);
    // Each answer is ~60 KB: 60 of them are 3.6 MB, over the 256 KiB a connection may queue.
    cache::PreparedAnswer big;
    big.ancount = 0;
    big.records.assign(60'000, 0);
    auto shared_big = std::make_shared<const cache::PreparedAnswer>(big);
    for (const auto& call : h.forwarder.resolved) {
        h.pipeline.deliver(call.cookie, upstream::ResolveOutcome{shared_big});
    }
    h.run_for(3);
    EXPECT_EQ(h.tcp.size(), 0u) << "the connection should be closed";
    EXPECT_EQ(h.shared.tcp.queued_bytes.load(), 0u);
    close(client);
}

// Queries held back while answers waited to be sent are handled once the answers drain,
// without new bytes from the client (the stall of the audit's review: it only resumed on a
// new read or an upstream answer, and the idle timer then closed the connection).
TEST(TcpConnection, HeldBackQueriesGoOnWhenTheAnswersDrain) {
    ServerHarness h;
    // Four cached answers of ~30 KB: after the third, more than 64 KiB waits unsent.
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA, 1, 1, 0, 0)
        .question("big.example.test", dns::rtype::TXT);
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::TXT, 300, 30'000);
    for (int i = 0; i < 30'000 / 250; ++i) {
        b.u8(249);
        for (int k = 0; k < 249; ++k) b.u8('x');
    }
    auto answer = cache::testing::prepare(b, cache::TtlPolicy{});
    ASSERT_TRUE(answer);
    dns::NameBuffer lower;
    dns::lower_name(dns::name_from_text("big.example.test")->view(), lower);
    h.cache.insert(cache::CacheKey{lower.view(), dns::rtype::TXT, dns::kClassIN, 0}, *answer,
                   h.loop.now_ms());
    const int client = h.connect_client();
    int small = 4096;
    setsockopt(client, SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    std::vector<uint8_t> burst;
    for (uint16_t id = 1; id <= 4; ++id) {
        auto q = tcp_query("big.example.test", dns::rtype::TXT, id);
        burst.insert(burst.end(), q.begin(), q.end());
    }
    write_all(client, burst);
    h.run_for(3);
    // Now read everything, as slowly as the loop lets it through.
    std::vector<uint8_t> buffer;
    std::vector<std::vector<uint8_t>> answers;
    for (int i = 0; i < 300 && answers.size() < 4; ++i) {
        h.run_for(1, 2);
        for (auto& m : read_messages(client, buffer)) answers.push_back(std::move(m));
    }
    ASSERT_EQ(answers.size(), 4u);
    EXPECT_EQ(id_of(answers[3]), 4);
    close(client);
}

// Reading a few bytes now and then does not keep a backlog of answers alive: the client has
// one idle period from when answers start to wait to take them all.
TEST(TcpConnection, ClientThatReadsATrickleIsDisconnected) {
    ServerHarness h(testing::test_config(), TcpLimits{.idle_timeout_ms = 200});
    const int client = h.connect_client(40000, 4096);
    std::vector<uint8_t> burst;
    for (uint16_t id = 1; id <= 4; ++id) {
        auto q = tcp_query("slow" + std::to_string(id) + ".example.test", dns::rtype::A, id);
        burst.insert(burst.end(), q.begin(), q.end());
    }
    write_all(client, burst);
    h.run_for(3);
    cache::PreparedAnswer big;
    big.records.assign(30'000, 0);
    auto shared_big = std::make_shared<const cache::PreparedAnswer>(big);
    for (const auto& call : h.forwarder.resolved) {
        h.pipeline.deliver(call.cookie, upstream::ResolveOutcome{shared_big});
    }
    bool eof = false;
    char chunk[64];
    for (int i = 0; i < 200 && !eof; ++i) {  // ~2 s of 64 bytes every 10 ms
        h.run_for(1, 10);
        const ssize_t n = recv(client, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n == 0) eof = true;
    }
    EXPECT_TRUE(eof) << "a client reading a trickle held its backlog";
    EXPECT_EQ(h.shared.tcp.queued_bytes.load(), 0u);
    close(client);
}

TEST(TcpConnection, PerClientCapRefusesTheConnectionOverIt) {
    ServerHarness h(testing::test_config(), TcpLimits{.max_per_client = 2});
    const int a = h.connect_client(1);
    const int b = h.connect_client(2);
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    EXPECT_FALSE(h.tcp.adopt(fds[0], testing::loopback_peer(3), sizeof(sockaddr_in)));
    close(fds[1]);
    EXPECT_EQ(h.tcp.size(), 2u);
    close(a);
    h.run_for(3);  // a's close is seen: its address has room again
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
    EXPECT_TRUE(h.tcp.adopt(fds[0], testing::loopback_peer(4), sizeof(sockaddr_in)));
    close(fds[1]);
    close(b);
}

// A cached TXT answer of ~30 KB for big.example.test.
void cache_big_txt(ServerHarness& h) {
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA, 1, 1, 0, 0)
        .question("big.example.test", dns::rtype::TXT);
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::TXT, 300, 30'000);
    for (int i = 0; i < 30'000 / 250; ++i) {
        b.u8(249);
        for (int k = 0; k < 249; ++k) b.u8('x');
    }
    auto answer = cache::testing::prepare(b, cache::TtlPolicy{});
    ASSERT_TRUE(answer);
    dns::NameBuffer lower;
    dns::lower_name(dns::name_from_text("big.example.test")->view(), lower);
    h.cache.insert(cache::CacheKey{lower.view(), dns::rtype::TXT, dns::kClassIN, 0}, *answer,
                   h.loop.now_ms());
}

// A real TCP connection over loopback (a socketpair never loses queued bytes): the client's
// end, its receive buffer `receive_buffer` bytes, so that an answer waits in the daemon's
// kernel send queue.
int connect_tcp_client(ServerHarness& h, int receive_buffer) {
    uint16_t port = 0;
    const int listener = testing::loopback_socket(SOCK_STREAM, &port);
    const int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    setsockopt(client, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = accept4(listener, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                           SOCK_NONBLOCK | SOCK_CLOEXEC);
    EXPECT_GE(fd, 0);
    close(listener);
    EXPECT_TRUE(h.tcp.adopt(fd, peer, peer_len));
    return client;
}

// The review of issue 20 (finding 3): a drain closed the connection once its answers were in
// the kernel; a query pipelined after the drain began sat unread, so close() sent RST and the
// kernel dropped the answer bytes the client had not yet taken. Now the daemon shuts its side
// down, discards what still comes, and closes once the client has closed.
TEST(TcpConnection, DrainDeliversAnswersAlreadyWrittenDespiteAPipelinedQuery) {
    ServerHarness h;
    cache_big_txt(h);
    const int client = connect_tcp_client(h, 4096);
    write_all(client, tcp_query("big.example.test", dns::rtype::TXT, 1));
    h.run_for(3);
    h.tcp.drain_all();  // SIGTERM
    write_all(client, tcp_query("big.example.test", dns::rtype::TXT, 2));
    std::vector<uint8_t> buffer;
    std::vector<std::vector<uint8_t>> answers;
    bool eof = false;
    bool reset = false;
    for (int i = 0; i < 2000 && !eof && !reset; ++i) {
        h.run_for(1, 1);
        pollfd p{client, POLLIN, 0};
        poll(&p, 1, 10);
        uint8_t chunk[4096];
        const ssize_t n = recv(client, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n == 0) eof = true;
        if (n < 0 && errno != EAGAIN) reset = true;
        if (n > 0) buffer.insert(buffer.end(), chunk, chunk + n);
    }
    for (auto& m : read_messages(client, buffer)) answers.push_back(std::move(m));
    EXPECT_FALSE(reset) << "the connection was reset: " << std::strerror(errno);
    EXPECT_TRUE(eof);
    ASSERT_EQ(answers.size(), 1u) << buffer.size() << " bytes of an answer left";
    EXPECT_EQ(id_of(answers[0]), 1);
    EXPECT_GT(answers[0].size(), 30'000u);
    close(client);
    h.run_for(3);
    EXPECT_EQ(h.tcp.size(), 0u);
}

// A client that never closes after the drain: the connection still goes at its idle timeout
// (the worker's drain deadline bounds it too), and what the client sends is discarded.
TEST(TcpConnection, DrainedConnectionWhoseClientStaysOpenClosesAtItsIdleTimeout) {
    ServerHarness h(testing::test_config(), TcpLimits{.idle_timeout_ms = 200});
    h.cache_a("www.example.test");
    const int client = connect_tcp_client(h, 65536);
    write_all(client, tcp_query("www.example.test", dns::rtype::A, 1));
    h.run_for(2);
    h.tcp.drain_all();
    for (int i = 0; i < 10; ++i) {
        write_all(client, tcp_query("www.example.test", dns::rtype::A, 2));
        h.run_for(1, 5);
    }
    EXPECT_EQ(h.tcp.size(), 1u);
    std::vector<uint8_t> buffer;
    bool eof = false;
    auto answers = read_messages(client, buffer, &eof);
    ASSERT_EQ(answers.size(), 1u) << "queries sent after the drain began are not answered";
    EXPECT_TRUE(eof) << "the daemon's side is shut down once its answers are written";
    h.run_for(50, 5);
    EXPECT_EQ(h.tcp.size(), 0u);
    close(client);
}

// A socket epoll refuses (here a regular file) must fail alone: the failed connection's
// clean-up once unregistered whatever handler held registration 0, the worker's UDP socket.
TEST(TcpConnection, FailedAdoptLeavesOtherHandlersRegistered) {
    ServerHarness h;
    int udp[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, udp), 0);
    struct Counter final : EventHandler {
        int fd = -1;
        int events = 0;
        void on_event(uint32_t) override {
            char c;
            if (recv(fd, &c, 1, 0) == 1) ++events;
        }
    } listener;
    listener.fd = udp[0];
    EventLoop::Registration reg;
    ASSERT_TRUE(h.loop.add(udp[0], EPOLLIN, &listener, reg));
    FILE* f = tmpfile();
    EXPECT_FALSE(h.tcp.adopt(dup(fileno(f)), testing::loopback_peer(), sizeof(sockaddr_in)));
    fclose(f);
    ASSERT_EQ(write(udp[1], "x", 1), 1);
    h.run_for(2);
    EXPECT_EQ(listener.events, 1);
    EXPECT_EQ(h.shared.tcp.connections.load(), 0u);
    h.loop.remove(reg);
    close(udp[0]);
    close(udp[1]);
}

}  // namespace
}  // namespace nscache::server
