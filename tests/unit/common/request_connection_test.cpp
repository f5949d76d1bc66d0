// SPDX-License-Identifier: BSD-3-Clause
#include "common/request_connection.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

// Audit item 6: the request sockets closed new clients once the total was reached, whoever
// held the open ones: one local user holding idle connections locked every other out.
TEST(RequestConnections, OneUserCannotHoldEveryConnection) {
    EventLoop loop;
    OkHandler handler;
    RequestConnections connections(loop, handler, 64, 10'000);
    std::vector<int> idle;  // this user's clients, which never send a request
    for (int i = 0; i < 64; ++i) {
        auto [server, client] = own_pair();
        connections.adopt(server);
        idle.push_back(client);
    }
    turns(loop);
    size_t kept = 0;
    for (int fd : idle) {
        char b;
        kept += recv(fd, &b, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN;  // open, not closed
    }
    EXPECT_LE(kept, 32u);  // a share of the total, well below it
    EXPECT_GE(kept, 1u);
    if (geteuid() != 0) {
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

}  // namespace
}  // namespace nscache
