// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/udp_socket_pool.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>

namespace nscache::upstream {
namespace {

struct CountingReceiver final : UdpSocketPool::Receiver {
    int readable = 0;
    void on_readable() override { ++readable; }
};

uint16_t port_of(const UdpSocketPool::Socket* s) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    getsockname(s->fd(), reinterpret_cast<sockaddr*>(&a), &len);
    return ntohs(a.sin_port);
}

// Sends one datagram from a fresh loopback socket to `to`'s port.
void send_to_port(uint16_t port) {
    const int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    const char byte = 'x';
    sendto(fd, &byte, 1, 0, reinterpret_cast<sockaddr*>(&a), sizeof a);
    close(fd);
}

TEST(UdpSocketPool, OutstandingSocketsNeverShareAPort) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 4});
    CountingReceiver r;
    std::vector<UdpSocketPool::Socket*> held;
    std::set<uint16_t> ports;
    for (int i = 0; i < 50; ++i) {
        held.push_back(pool.acquire(AF_INET, &r));
        ASSERT_NE(held.back(), nullptr);
        ports.insert(port_of(held.back()));
    }
    EXPECT_EQ(ports.size(), 50u);  // one port per outstanding query
    for (auto* s : held) pool.release(s, true);
}

TEST(UdpSocketPool, AnsweredSocketIsReusedGivenUpSocketIsClosed) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 1});
    CountingReceiver r;
    auto* s = pool.acquire(AF_INET, &r);
    const uint16_t port = port_of(s);
    pool.release(s, true);
    EXPECT_EQ(pool.idle(AF_INET), 1u);
    s = pool.acquire(AF_INET, &r);
    EXPECT_EQ(port_of(s), port);  // the only idle one
    pool.release(s, false);       // given up: a late answer must not meet the next query
    EXPECT_EQ(pool.idle(AF_INET), 0u);
    EXPECT_EQ(pool.open_sockets(), 0u);
}

TEST(UdpSocketPool, SocketIsReplacedAfterMaxUses) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 1, .max_uses = 3});
    CountingReceiver r;
    std::set<uint16_t> ports;
    for (int i = 0; i < 9; ++i) {
        auto* s = pool.acquire(AF_INET, &r);
        ports.insert(port_of(s));
        pool.release(s, true);
    }
    EXPECT_EQ(counters.upstream_sockets_opened.load(), 3u);
    EXPECT_GE(ports.size(), 2u);  // the kernel may hand a freed port out again, rarely
}

TEST(UdpSocketPool, SocketIsReplacedAfterMaxAge) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 1, .max_age_ms = 20});
    CountingReceiver r;
    auto* s = pool.acquire(AF_INET, &r);
    pool.release(s, true);
    EXPECT_EQ(pool.open_sockets(), 1u);
    usleep(30'000);
    loop.refresh_now();
    s = pool.acquire(AF_INET, &r);
    pool.release(s, true);  // past its age: closed
    EXPECT_EQ(pool.open_sockets(), 0u);
}

TEST(UdpSocketPool, MismatchedAnswerRetiresTheSocket) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 1});
    CountingReceiver r;
    auto* s = pool.acquire(AF_INET, &r);
    send_to_port(port_of(s));
    loop.run_once(100);
    EXPECT_EQ(r.readable, 1);  // the holder reads it
    pool.taint(s);             // ... and finds it is not its answer
    pool.release(s, true);
    EXPECT_EQ(pool.open_sockets(), 0u);
    EXPECT_EQ(counters.upstream_sockets_spoofed.load(), 1u);
}

TEST(UdpSocketPool, DatagramOnAnIdleSocketRetiresIt) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 2});
    CountingReceiver r;
    auto* s = pool.acquire(AF_INET, &r);
    const uint16_t port = port_of(s);
    pool.release(s, true);
    ASSERT_EQ(pool.idle(AF_INET), 2u);
    send_to_port(port);
    loop.run_once(100);
    EXPECT_EQ(r.readable, 0);
    EXPECT_EQ(pool.idle(AF_INET), 1u);
    EXPECT_EQ(counters.dropped_mismatched.load(), 1u);
    EXPECT_EQ(counters.upstream_sockets_spoofed.load(), 1u);
}

TEST(UdpSocketPool, IdleSocketsAreDrawnAtRandom) {
    EventLoop loop;
    WorkerCounters counters;
    UdpSocketPool pool(loop, counters, UdpPoolOptions{.idle_sockets = 64});
    CountingReceiver r;
    std::set<uint16_t> ports;
    for (int i = 0; i < 40; ++i) {
        auto* s = pool.acquire(AF_INET, &r);
        ports.insert(port_of(s));
        pool.release(s, true);
    }
    // Sequential queries, one in flight at a time, still leave from many ports (40 draws
    // from 64 give about 30 distinct ports; fewer than 15 is vanishingly unlikely).
    EXPECT_GE(ports.size(), 15u);
}

}  // namespace
}  // namespace nscache::upstream
