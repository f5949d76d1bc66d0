// SPDX-License-Identifier: BSD-3-Clause
#include "control/takeover_session.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <memory>
#include <string>

#include "fake_clock.h"

namespace nscache::control {
namespace {

class TakeoverSessionTest : public ::testing::Test {
  protected:
    void SetUp() override {
        int fds[2];
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
        server_ = fds[0];
        peer_ = fds[1];
        fcntl(server_, F_SETFL, O_NONBLOCK);
        timeval tv{2, 0};
        setsockopt(peer_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        hooks_.offer = [this]() -> Result<std::vector<NamedFd>> {
            ++offers_;
            if (!offer_error_.empty()) return Error{offer_error_};
            return std::vector<NamedFd>{{"cache", open("/dev/null", O_RDONLY | O_CLOEXEC)}};
        };
        hooks_.drain = [this] { ++drains_; };
        hooks_.handing_over = [this] { ++sent_; };
    }
    void TearDown() override {
        session_.reset();
        if (peer_ >= 0) close(peer_);
    }
    void start(ControlAccess access = {.owner_uid = geteuid(), .group = std::nullopt}) {
        session_ =
            std::make_unique<TakeoverSession>(loop_, server_, access, hooks_, [this] { ++done_; });
        session_->start();
    }
    void turn() { loop_.run_once(0); }
    std::string read_line() {
        char buf[256];
        const ssize_t n = recv(peer_, buf, sizeof buf, 0);
        return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
    }

    testing::FakeClock clock_;
    EventLoop loop_{clock_};
    TakeoverHooks hooks_;
    std::string offer_error_;
    int offers_ = 0;
    int drains_ = 0;
    int sent_ = 0;
    int done_ = 0;
    int server_ = -1;
    int peer_ = -1;
    std::unique_ptr<TakeoverSession> session_;
};

TEST_F(TakeoverSessionTest, DrainsOnlyOnceTheNewInstanceSaysItIsReady) {
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_TRUE(offer.ok()) << offer.error();
    ASSERT_EQ(offer->size(), 1u);
    EXPECT_EQ((*offer)[0].name, "cache");
    close_all(*offer);
    turn();
    EXPECT_EQ(drains_, 0);
    ASSERT_EQ(send(peer_, "ready\n", 6, 0), 6);
    turn();
    EXPECT_EQ(drains_, 1);
    EXPECT_TRUE(session_->drained());
    EXPECT_EQ(done_, 1);
    EXPECT_EQ(read_line(), "ok draining\n");
}

TEST_F(TakeoverSessionTest, APeerThatGoesAwayChangesNothing) {
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_TRUE(offer.ok());
    close_all(*offer);
    close(peer_);
    peer_ = -1;
    turn();
    EXPECT_EQ(drains_, 0);
    EXPECT_FALSE(session_->drained());
    EXPECT_EQ(done_, 1);
}

TEST_F(TakeoverSessionTest, ThePathsAreGivenUpOnceTheOfferIsSentNotOnlyAtTheDrain) {
    start();
    // Sent: the new instance may serve the socket paths from now on, ready or not.
    EXPECT_EQ(sent_, 1);
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_TRUE(offer.ok());
    close_all(*offer);
    close(peer_);
    peer_ = -1;
    turn();
    EXPECT_EQ(drains_, 0);
    EXPECT_EQ(sent_, 1);
}

TEST_F(TakeoverSessionTest, ARefusalGivesUpNoPath) {
    offer_error_ = "cannot dump the cache";
    start();
    EXPECT_EQ(sent_, 0);
}

TEST_F(TakeoverSessionTest, AnythingButReadyChangesNothing) {
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_TRUE(offer.ok());
    close_all(*offer);
    ASSERT_EQ(send(peer_, "readyish\n", 9, 0), 9);
    turn();
    EXPECT_EQ(drains_, 0);
    EXPECT_EQ(done_, 1);
}

TEST_F(TakeoverSessionTest, ASilentPeerIsGivenUpAtTheDeadline) {
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_TRUE(offer.ok());
    close_all(*offer);
    clock_.advance_ms(TakeoverSession::kReadyTimeoutMs - 1);
    turn();
    EXPECT_EQ(done_, 0);
    clock_.advance_ms(1);
    turn();
    EXPECT_EQ(done_, 1);
    EXPECT_EQ(drains_, 0);
}

TEST_F(TakeoverSessionTest, RootMayTakeOverWhoeverOwnsTheDaemon) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root";
    // (A control-group member that is neither is refused: tests/integration/test_takeover.py.)
    start({.owner_uid = 12345, .group = getegid()});
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    EXPECT_TRUE(offer.ok());
    if (offer.ok()) close_all(*offer);
}

TEST_F(TakeoverSessionTest, AnOfferThatCannotBeMadeIsARefusal) {
    offer_error_ = "cannot dump the cache";
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_FALSE(offer.ok());
    EXPECT_EQ(offer.error(), "cannot dump the cache");
    EXPECT_EQ(done_, 1);
    EXPECT_EQ(drains_, 0);
}

TEST_F(TakeoverSessionTest, WithoutADrainHookTakeoverIsRefused) {
    hooks_.drain = nullptr;
    start();
    Result<std::vector<NamedFd>> offer = receive_takeover(peer_);
    ASSERT_FALSE(offer.ok());
    EXPECT_EQ(offers_, 0);
}

}  // namespace
}  // namespace nscache::control
