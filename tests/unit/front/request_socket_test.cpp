// SPDX-License-Identifier: BSD-3-Clause
#include "front/request_socket.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "fake_clock.h"
#include "front/front_test_support.h"

namespace nscache::front {
namespace {

using testing::connect_as_child;
using testing::held;
using testing::read_reply;
using testing::send_all;
using testing::TempFolder;

// Requests of one byte, answered "ok"; '!' is invalid.
struct OkHandler final : RequestHandler {
    size_t request_size(std::span<const uint8_t> in) const override {
        if (in.empty()) return 0;
        return in[0] == '!' ? kInvalid : 1;
    }
    void on_request(RequestConnection& connection, std::span<const uint8_t>) override {
        connection.send({'o', 'k'});
    }
};

struct SocketHarness {
    explicit SocketHarness(size_t max_per_user = 0)
        : loop(clock),
          socket(loop, handler,
                 RequestSocketOptions{.path = folder / "test.sock",
                                      .what = "test socket",
                                      .max_connections = 16,
                                      .timeout_ms = 2000,
                                      .max_per_user = max_per_user}) {}
    void turns(int n = 5) {
        for (int i = 0; i < n; ++i) loop.run_once(0);
    }
    TempFolder folder;
    nscache::testing::FakeClock clock;
    EventLoop loop;
    OkHandler handler;
    RequestSocket socket;
};

// Every local user resolves names: the socket is 0666 whatever the daemon's umask, and the
// mode comes from the umask at bind(), not from a chmod() by path.
TEST(RequestSocket, IsBornReadableAndWritableByEveryone) {
    SocketHarness h;
    const mode_t old = umask(0077);
    ASSERT_TRUE(h.socket.bind());
    EXPECT_EQ(umask(old), 0077);  // put back
    struct stat st {};
    ASSERT_EQ(lstat(h.socket.path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0666u);
}

// A symlink planted at the path is replaced, never followed: what it pointed at is untouched.
TEST(RequestSocket, ReplacesASymlinkAtThePathWithoutFollowingIt) {
    SocketHarness h;
    const std::string target = h.folder / "target";
    testing::write_file(target, "keep\n");
    chmod(target.c_str(), 0600);
    ASSERT_EQ(symlink(target.c_str(), h.socket.path().c_str()), 0);
    ASSERT_TRUE(h.socket.bind());
    struct stat st {};
    ASSERT_EQ(lstat(h.socket.path().c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    ASSERT_EQ(stat(target.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST(RequestSocket, SaysWhyWhenThePathIsTooLong) {
    TempFolder folder;
    EventLoop loop;
    OkHandler handler;
    RequestSocket socket(
        loop, handler,
        RequestSocketOptions{.path = folder / std::string(200, 'x'), .what = "NSS socket"});
    const Result<void> r = socket.bind();
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().find("NSS socket path too long"), std::string::npos);
}

TEST(RequestSocket, UnlinksItsPathWhenDestroyed) {
    std::string path;
    TempFolder folder;
    {
        EventLoop loop;
        OkHandler handler;
        RequestSocket socket(loop, handler,
                             RequestSocketOptions{.path = folder / "s.sock", .what = "socket"});
        ASSERT_TRUE(socket.bind());
        path = socket.path();
        EXPECT_EQ(access(path.c_str(), F_OK), 0);
    }
    EXPECT_NE(access(path.c_str(), F_OK), 0);
}

TEST(RequestSocket, AnswersARequestAndClosesBadOnes) {
    SocketHarness h;
    ASSERT_TRUE(h.socket.bind());
    ASSERT_TRUE(h.socket.listen(16));
    h.socket.start();

    const int good = connect_as_child(h.socket.path());
    ASSERT_GE(good, 0);
    send_all(good, {'a'});
    h.turns();
    bool closed = false;
    const std::vector<uint8_t> reply = read_reply(good, &closed);
    EXPECT_EQ(std::string(reply.begin(), reply.end()), "ok");
    EXPECT_TRUE(closed);
    close(good);

    const int bad = connect_as_child(h.socket.path());
    ASSERT_GE(bad, 0);
    send_all(bad, {'!'});
    h.turns();
    EXPECT_TRUE(read_reply(bad, &closed).empty());
    EXPECT_TRUE(closed);
    close(bad);
}

// A client that sends nothing is closed at its deadline (by the loop's clock), not before.
TEST(RequestSocket, AnIdleClientIsClosedAtItsDeadline) {
    SocketHarness h;
    ASSERT_TRUE(h.socket.bind());
    ASSERT_TRUE(h.socket.listen(16));
    h.socket.start();
    const int idle = connect_as_child(h.socket.path());
    ASSERT_GE(idle, 0);
    h.turns();  // accepted
    h.clock.advance_ms(1999);
    h.turns();
    EXPECT_TRUE(held(idle));
    h.clock.advance_ms(1);
    h.turns();
    EXPECT_FALSE(held(idle));
    close(idle);
}

// One user holds at most its share of the connections (root has none: it is held to the
// total only). Run as root, the clients are another user's; otherwise this user's own.
TEST(RequestSocket, OneUserHoldsAtMostItsShare) {
    SocketHarness h(/*max_per_user=*/2);
    ASSERT_TRUE(h.socket.bind());
    ASSERT_TRUE(h.socket.listen(16));
    h.socket.start();
    const uid_t user = geteuid() == 0 ? 65534 : static_cast<uid_t>(-1);
    std::vector<int> clients;
    for (int i = 0; i < 4; ++i) {
        clients.push_back(connect_as_child(h.socket.path(), user));
        ASSERT_GE(clients.back(), 0);
        h.turns(2);
    }
    size_t kept = 0;
    for (int fd : clients) kept += held(fd);
    EXPECT_EQ(kept, 2u);
    // A closed one frees its place in the share.
    h.clock.advance_ms(2000);
    h.turns();
    for (int fd : clients) close(fd);
    h.turns();
    const int again = connect_as_child(h.socket.path(), user);
    ASSERT_GE(again, 0);
    h.turns();
    EXPECT_TRUE(held(again));
    if (geteuid() == 0) {  // root's own clients are held to the total only
        std::vector<int> root;
        for (int i = 0; i < 4; ++i) root.push_back(connect_as_child(h.socket.path()));
        h.turns();
        for (int fd : root) {
            EXPECT_TRUE(held(fd));
            close(fd);
        }
    }
    close(again);
}

}  // namespace
}  // namespace nscache::front
