// SPDX-License-Identifier: BSD-3-Clause
#include "common/event_loop.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <vector>

#include "fake_clock.h"

namespace nscache {
namespace {

struct Recorder final : EventHandler {
    int events = 0;
    std::function<void()> on;
    void on_event(uint32_t) override {
        ++events;
        if (on) on();
    }
};

struct SocketPair {
    int fds[2];
    SocketPair() { EXPECT_EQ(socketpair(AF_UNIX, SOCK_DGRAM | SOCK_NONBLOCK, 0, fds), 0); }
    ~SocketPair() {
        close(fds[0]);
        close(fds[1]);
    }
    void poke() { ASSERT_EQ(write(fds[1], "x", 1), 1); }
};

TEST(EventLoop, TimersRunInDeadlineOrderAndCancelledOnesNever) {
    testing::FakeClock clock;
    EventLoop loop(clock);
    std::vector<int> ran;
    const uint64_t now = loop.now_ms();
    loop.add_timer(now + 2, [&] { ran.push_back(2); });
    auto cancelled = loop.add_timer(now + 1, [&] { ran.push_back(99); });
    loop.add_timer(now, [&] { ran.push_back(1); });
    loop.cancel_timer(cancelled);
    EXPECT_EQ(cancelled, EventLoop::kNoTimer);
    loop.cancel_timer(cancelled);  // twice: harmless
    loop.run_once(0);
    EXPECT_EQ(ran, (std::vector<int>{1}));  // only the one due now
    clock.advance_ms(2);
    loop.run_once(0);
    EXPECT_EQ(ran, (std::vector<int>{1, 2}));
}

TEST(EventLoop, TimerAddedByATimerWaitsForTheNextTurn) {
    EventLoop loop;
    int runs = 0;
    std::function<void()> again = [&] {
        ++runs;
        loop.add_timer(0, again);  // due at once, but not in this turn
    };
    loop.add_timer(0, again);
    loop.run_once(0);
    EXPECT_EQ(runs, 1);
    loop.run_once(0);
    EXPECT_EQ(runs, 2);
}

TEST(EventLoop, HandlerRemovedInTheSameBatchIsNotCalled) {
    EventLoop loop;
    SocketPair a, b;
    Recorder first, second;
    EventLoop::Registration ra, rb;
    ASSERT_TRUE(loop.add(a.fds[0], EPOLLIN, &first, ra));
    ASSERT_TRUE(loop.add(b.fds[0], EPOLLIN, &second, rb));
    // Whichever runs first removes the other: the other's event, already fetched, is stale.
    first.on = [&] { loop.remove(rb); };
    second.on = [&] { loop.remove(ra); };
    a.poke();
    b.poke();
    loop.run_once(100);
    EXPECT_EQ(first.events + second.events, 1);
}

// A registration that never succeeded (kNoRegistration) must not remove another handler's:
// a failed TCP adopt used to unregister the worker's UDP socket this way.
TEST(EventLoop, RemovingAnEmptyRegistrationTouchesNoOtherHandler) {
    EventLoop loop;
    SocketPair udp;
    Recorder listener;
    EventLoop::Registration reg;
    ASSERT_TRUE(loop.add(udp.fds[0], EPOLLIN, &listener, reg));
    EventLoop::Registration never = EventLoop::kNoRegistration;
    loop.remove(never);
    loop.forget(never);
    loop.modify(never, 0);
    udp.poke();
    loop.run_once(100);
    EXPECT_EQ(listener.events, 1);
}

TEST(EventLoop, FailedAddLeavesNothingRegistered) {
    EventLoop loop;
    // epoll refuses regular files.
    FILE* f = tmpfile();
    ASSERT_NE(f, nullptr);
    Recorder r;
    EventLoop::Registration reg = EventLoop::kNoRegistration;
    EXPECT_FALSE(loop.add(fileno(f), EPOLLIN, &r, reg));
    EXPECT_EQ(reg, EventLoop::kNoRegistration);
    EXPECT_EQ(loop.registrations(), 0u);
    fclose(f);
}

TEST(EventLoop, WakeRunsTheCallbackOnTheLoop) {
    EventLoop loop;
    int woken = 0;
    loop.wake();
    loop.run_once(100, [&] { ++woken; });
    EXPECT_EQ(woken, 1);
}

TEST(EventLoop, AFakeClockMovesTimersWithoutWaiting) {
    testing::FakeClock clock;
    EventLoop loop(clock);
    std::vector<int> ran;
    const uint64_t start = loop.now_ms();
    EXPECT_EQ(start, clock.now_ms());
    loop.add_timer(start + 30'000, [&] { ran.push_back(30); });
    loop.add_timer(start + 10'000, [&] { ran.push_back(10); });
    loop.run_once(0);
    EXPECT_TRUE(ran.empty());  // nothing is due while the clock stands still
    clock.advance_ms(10'000);
    loop.run_once(0);
    EXPECT_EQ(ran, (std::vector<int>{10}));
    EXPECT_EQ(loop.now_ms(), start + 10'000);
    clock.advance_ms(20'000);
    loop.run_once(0);
    EXPECT_EQ(ran, (std::vector<int>{10, 30}));
}

}  // namespace
}  // namespace nscache
