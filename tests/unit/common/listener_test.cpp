// SPDX-License-Identifier: BSD-3-Clause
#include "common/listener.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "fake_clock.h"

namespace nscache {
namespace {

struct Loopback {
    Loopback() {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        EXPECT_EQ(listen(fd, 64), 0);
        socklen_t len = sizeof a;
        getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
        port = ntohs(a.sin_port);
    }
    ~Loopback() { close(fd); }

    // A connected client: the kernel finishes the handshake before anyone accepts.
    int connect_client() const {
        const int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_port = htons(port);
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        EXPECT_EQ(connect(c, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
        return c;
    }

    int fd = -1;
    uint16_t port = 0;
};

bool closed_by_peer(int fd) {
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) == 0;
}

TEST(Listener, HandsEachConnectionOverNonBlockingWithItsPeer) {
    testing::FakeClock clock;
    EventLoop loop(clock);
    Loopback server;
    std::vector<int> accepted;
    std::vector<sockaddr_storage> peers;
    Listener listener(loop, server.fd, "test socket",
                      [&](int fd, const sockaddr_storage& peer, socklen_t) {
                          accepted.push_back(fd);
                          peers.push_back(peer);
                      });
    ASSERT_TRUE(listener.start());
    const int a = server.connect_client();
    const int b = server.connect_client();
    loop.run_once(0);
    ASSERT_EQ(accepted.size(), 2u);
    for (int fd : accepted) {
        EXPECT_TRUE(fcntl(fd, F_GETFL) & O_NONBLOCK);
        EXPECT_TRUE(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        close(fd);
    }
    EXPECT_EQ(peers[0].ss_family, AF_INET);
    EXPECT_EQ(reinterpret_cast<const sockaddr_in&>(peers[0]).sin_addr.s_addr,
              htonl(INADDR_LOOPBACK));
    close(a);
    close(b);
}

// Out of descriptors (EMFILE), the waiting connection would keep a level-triggered loop
// spinning: the spare descriptor is given up to accept it, it is closed at once, on_shed
// hears of it, and the listener goes on once descriptors are back.
TEST(Listener, OutOfDescriptorsShedsTheConnectionWithTheSpare) {
    testing::FakeClock clock;
    EventLoop loop(clock);
    Loopback server;
    int handed = 0;
    int shed = 0;
    Listener listener(loop, server.fd, "test socket",
                      [&](int fd, const sockaddr_storage&, socklen_t) {
                          ++handed;
                          close(fd);
                      });
    listener.set_on_shed([&] { ++shed; });
    ASSERT_TRUE(listener.start());
    // One connection handed over first: the loop's call into the listener is then known to
    // UBSan's vptr check, whose first check of a type opens a pipe (none can be had below).
    const int first = server.connect_client();
    loop.run_once(0);
    ASSERT_EQ(handed, 1);
    close(first);
    handed = 0;
    const int client = server.connect_client();

    // No descriptor free from here on: the lowest free one is at the limit.
    rlimit saved{};
    ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &saved), 0);
    const int lowest_free = dup(0);
    ASSERT_GE(lowest_free, 0);
    close(lowest_free);
    rlimit tight = saved;
    tight.rlim_cur = static_cast<rlim_t>(lowest_free);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &tight), 0);
    loop.run_once(0);
    ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &saved), 0);

    EXPECT_EQ(handed, 0);
    EXPECT_EQ(shed, 1);
    EXPECT_TRUE(closed_by_peer(client));
    close(client);

    const int next = server.connect_client();
    loop.run_once(0);
    EXPECT_EQ(handed, 1) << "the listener stopped after shedding";
    EXPECT_EQ(shed, 1);
    close(next);
}

// An accept(2) that fails with each errno of `failures` in turn, then accepts for real.
std::vector<int> failures;
int failing_accept(int fd, sockaddr* peer, socklen_t* length, int flags) {
    if (!failures.empty()) {
        errno = failures.front();
        failures.erase(failures.begin());
        return -1;
    }
    return accept4(fd, peer, length, flags);
}

// Review finding 3: Linux hands a new connection's pending network error back from accept()
// (accept(2): ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH, EOPNOTSUPP,
// ENETUNREACH), and EPERM when a firewall rule forbids it. Each concerns that one connection:
// the listener goes on with the next at once, where it used to rest a second (a remote peer
// could blank DNS over TCP for a second at will).
TEST(Listener, APerConnectionErrorSkipsThatConnectionOnly) {
    for (const int error : {ENETDOWN, EPROTO, ENOPROTOOPT, EHOSTDOWN, ENONET, EHOSTUNREACH,
                            EOPNOTSUPP, ENETUNREACH, EPERM, ECONNABORTED}) {
        testing::FakeClock clock;
        EventLoop loop(clock);
        Loopback server;
        int handed = 0;
        Listener listener(loop, server.fd, "test socket",
                          [&](int fd, const sockaddr_storage&, socklen_t) {
                              ++handed;
                              close(fd);
                          });
        listener.set_accept_for_tests(&failing_accept);
        ASSERT_TRUE(listener.start());
        failures = {error};
        const int client = server.connect_client();
        loop.run_once(0);
        EXPECT_EQ(handed, 1) << std::strerror(error);
        const int next = server.connect_client();
        loop.run_once(0);
        EXPECT_EQ(handed, 2) << std::strerror(error) << ": the listener rested";
        close(client);
        close(next);
    }
}

// Out of kernel memory (ENOBUFS, ENOMEM), the next accept would fail alike: the listener
// rests a second rather than spin, then goes on.
TEST(Listener, OutOfMemoryRestsTheListenerASecond) {
    for (const int error : {ENOBUFS, ENOMEM}) {
        testing::FakeClock clock;
        EventLoop loop(clock);
        Loopback server;
        int handed = 0;
        Listener listener(loop, server.fd, "test socket",
                          [&](int fd, const sockaddr_storage&, socklen_t) {
                              ++handed;
                              close(fd);
                          });
        listener.set_accept_for_tests(&failing_accept);
        ASSERT_TRUE(listener.start());
        failures = {error};
        const int client = server.connect_client();
        loop.run_once(0);
        EXPECT_EQ(handed, 0) << std::strerror(error);
        clock.advance_ms(999);
        loop.run_once(0);
        EXPECT_EQ(handed, 0) << std::strerror(error);
        clock.advance_ms(1);
        loop.run_once(0);  // the rest is over
        loop.run_once(0);  // the waiting connection
        EXPECT_EQ(handed, 1) << std::strerror(error);
        close(client);
    }
}

}  // namespace
}  // namespace nscache
