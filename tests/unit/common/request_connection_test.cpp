// SPDX-License-Identifier: BSD-3-Clause
#include "common/request_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace nscache {
namespace {

// One-byte requests, answered "ok" at once.
struct OkHandler final : RequestHandler {
    size_t request_size(std::span<const uint8_t> in) const override { return in.empty() ? 0 : 1; }
    void on_request(RequestConnection& connection, std::span<const uint8_t>) override {
        connection.send({'o', 'k'});
    }
};

// (server end, client end) of a socketpair whose SO_PEERCRED is this process's.
std::pair<int, int> own_pair() {
    int fds[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    return {fds[0], fds[1]};
}

// The same, made by a child that became `uid` first: SO_PEERCRED says `uid`.
std::pair<int, int> pair_of_user(uid_t uid) {
    int carrier[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, carrier), 0);
    const pid_t child = fork();
    if (child == 0) {
        int fds[2];
        if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0 ||
            socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds) != 0) {
            _exit(1);
        }
        char byte = 0;
        iovec iov{&byte, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(2 * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds, sizeof fds);
        _exit(sendmsg(carrier[1], &msg, 0) == 1 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    char byte;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(2 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    int fds[2] = {-1, -1};
    if (recvmsg(carrier[0], &msg, MSG_DONTWAIT) == 1 && CMSG_FIRSTHDR(&msg) != nullptr) {
        std::memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fds);
    }
    close(carrier[0]);
    close(carrier[1]);
    return {fds[0], fds[1]};
}

void turns(EventLoop& loop) {
    for (int i = 0; i < 5; ++i) loop.run_once(5);
}

// Is `fd`, the client end, still open on the server side (not closed at adopt)?
bool held(int fd) {
    char b;
    return recv(fd, &b, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;
}

// Audit item 6: the request sockets closed new clients once the total was reached, whoever
// held the open ones: one local user holding idle connections locked every other out.
TEST(RequestConnections, OneUserCannotHoldEveryConnection) {
    EventLoop loop;
    OkHandler handler;
    RequestConnections connections(loop, handler, 64, 10'000);
    // Root has no share of its own (it is no hostile local user): as root, the idle clients
    // are another user's.
    const bool root = geteuid() == 0;
    std::vector<int> idle;  // this user's clients, which never send a request
    for (int i = 0; i < 64; ++i) {
        auto [server, client] = root ? pair_of_user(65533) : own_pair();
        ASSERT_GE(server, 0);
        connections.adopt(server);
        idle.push_back(client);
    }
    turns(loop);
    size_t kept = 0;
    for (int fd : idle) kept += held(fd);
    EXPECT_LE(kept, 32u);  // a share of the total, well below it
    EXPECT_GE(kept, 1u);
    if (!root) {
        for (int fd : idle) close(fd);
        GTEST_SKIP() << "the rest needs root (a client of another user)";
    }

    auto [server, client] = pair_of_user(65534);
    ASSERT_GE(server, 0);
    connections.adopt(server);
    ASSERT_EQ(send(client, "x", 1, MSG_NOSIGNAL), 1);
    turns(loop);
    char reply[2] = {};
    EXPECT_EQ(recv(client, reply, sizeof reply, MSG_DONTWAIT), 2);  // answered
    close(client);
    for (int fd : idle) close(fd);
}

// Review of item 6: the share applied to root too, so a root service's thread pool with more
// uncached lookups at once than the share (128 of 1,024) had the excess closed; with
// `hosts: nscache` alone that is EAI_AGAIN. Root is exempt (it still counts toward the
// total); another user is still held to its share.
TEST(RequestConnections, RootMayHoldMoreThanAShare) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (clients of root and of another user)";
    EventLoop loop;
    OkHandler handler;
    RequestConnections connections(loop, handler, 64, 10'000, 8);
    std::vector<int> roots;
    for (int i = 0; i < 40; ++i) {
        auto [server, client] = own_pair();
        connections.adopt(server);
        roots.push_back(client);
    }
    std::vector<int> others;
    for (int i = 0; i < 20; ++i) {
        auto [server, client] = pair_of_user(65534);
        ASSERT_GE(server, 0);
        connections.adopt(server);
        others.push_back(client);
    }
    // The total still holds root: past 64 in all, a root client is closed too.
    std::vector<int> over;
    for (int i = 0; i < 20; ++i) {
        auto [server, client] = own_pair();
        connections.adopt(server);
        over.push_back(client);
    }
    turns(loop);
    size_t roots_held = 0, others_held = 0, over_held = 0;
    for (int fd : roots) roots_held += held(fd);
    for (int fd : others) others_held += held(fd);
    for (int fd : over) over_held += held(fd);
    EXPECT_EQ(roots_held, 40u);  // five times the share
    EXPECT_EQ(others_held, 8u);  // the share
    EXPECT_EQ(over_held, 64u - 40u - 8u);
    // The ones closed were closed at once (EOF now), never held: the client falls back.
    size_t closed = 0;
    for (int fd : others) {
        char b;
        closed += recv(fd, &b, 1, MSG_DONTWAIT) == 0;
    }
    EXPECT_EQ(closed, 12u);
    for (int fd : roots) close(fd);
    for (int fd : others) close(fd);
    for (int fd : over) close(fd);
}

// A user's share is a quarter of the table unless told otherwise.
TEST(RequestConnections, DefaultShareIsAQuarter) {
    EventLoop loop;
    OkHandler handler;
    RequestConnections connections(loop, handler, 64, 10'000);
    const bool root = geteuid() == 0;
    std::vector<int> clients;
    for (int i = 0; i < 40; ++i) {
        auto [server, client] = root ? pair_of_user(65534) : own_pair();
        ASSERT_GE(server, 0);
        connections.adopt(server);
        clients.push_back(client);
    }
    turns(loop);
    size_t kept = 0;
    for (int fd : clients) kept += held(fd);
    EXPECT_EQ(kept, 16u);
    for (int fd : clients) close(fd);
}

}  // namespace
}  // namespace nscache
