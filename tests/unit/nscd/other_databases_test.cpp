// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/other_databases.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace nscache::nscd {
namespace {

std::vector<uint8_t> key(const std::string& s) {
    return {s.begin(), s.end()};
}

// An NSS source where the keys "slow..." block until opened (at most 10 s), and which counts
// the lookups of each key's first letter.
struct SlowSource {
    std::mutex mu;
    std::condition_variable cv;
    bool open = false;
    std::map<char, int> calls;

    std::vector<uint8_t> lookup(RequestType, const std::vector<uint8_t>& k) {
        std::unique_lock<std::mutex> lock(mu);
        ++calls[static_cast<char>(k[0])];
        if (k[0] == 's') cv.wait_for(lock, std::chrono::seconds(10), [this] { return open; });
        return {k[0]};
    }
    void release() {
        {
            std::lock_guard<std::mutex> lock(mu);
            open = true;
        }
        cv.notify_all();
    }
    int called(char c) {
        std::lock_guard<std::mutex> lock(mu);
        return calls[c];
    }
};

struct Pool {
    EventLoop loop;
    SlowSource source;
    std::atomic<uint64_t> now{1000};
    OtherDatabases pool{
        loop, 2,
        [this](RequestType t, const std::vector<uint8_t>& k) { return source.lookup(t, k); },
        [this] { return now.load(); }};
    std::map<uint64_t, std::vector<uint8_t>> replies;

    Pool() { pool.start(); }
    ~Pool() {
        source.release();
        pool.stop();
    }
    // Runs the loop until `connection` is answered or `turns` turns of up to 10 ms passed.
    bool answered(uint64_t connection, int turns) {
        for (int i = 0; i < turns && replies.count(connection) == 0; ++i) {
            loop.run_once(10, [this] {
                pool.drain([this](uint64_t c, std::vector<uint8_t> r) { replies[c] = r; });
            });
        }
        return replies.count(connection) != 0;
    }
};

constexpr uint64_t kLater = 1'000'000;

// Audit item 7: one user's flood of lookups on a slow source held every pool thread and the
// queue, and pushed everyone else's past glibc's deadline.
TEST(OtherDatabases, OneUsersFloodDoesNotHoldEveryThread) {
    Pool p;
    for (uint64_t c = 1; c <= 64; ++c) p.pool.submit(c, 1000, GETPWBYNAME, key("slow"), kLater);
    ASSERT_TRUE(p.pool.submit(999, 2000, GETPWBYNAME, key("fast"), kLater));
    EXPECT_TRUE(p.answered(999, 200));  // while the slow source still blocks
    EXPECT_LE(p.source.called('s'), 1);
}

TEST(OtherDatabases, ALookupPastItsClientsDeadlineNeverRuns) {
    Pool p;
    ASSERT_TRUE(p.pool.submit(1, 1000, GETPWBYNAME, key("slow-1"), kLater));
    ASSERT_TRUE(p.pool.submit(2, 2000, GETPWBYNAME, key("slow-2"), kLater));
    for (int i = 0; i < 100 && p.source.called('s') < 2; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(p.source.called('s'), 2);  // both threads are busy
    for (uint64_t c = 10; c < 20; ++c) p.pool.submit(c, 3000, GETPWBYNAME, key("late"), 2000);
    ASSERT_TRUE(p.pool.submit(20, 3000, GETPWBYNAME, key("gone"), kLater));
    p.pool.cancel(20, 3000);  // its client hung up
    ASSERT_TRUE(p.pool.submit(21, 3000, GETPWBYNAME, key("in time"), kLater));
    p.now = 2500;  // the "late" clients gave up
    p.source.release();
    EXPECT_TRUE(p.answered(21, 200));
    EXPECT_EQ(p.source.called('l'), 0);
    EXPECT_EQ(p.source.called('g'), 0);
    EXPECT_EQ(p.source.called('i'), 1);
}

// Review item 1: stop() joined every thread, so a lookup stuck in an NSS module (an LDAP server
// away) held the daemon's shutdown for as long as the module's own timeout. Now it is left
// behind, and what it returns late (its Finish) never runs on what was stopped.
TEST(OtherDatabases, StopLeavesAThreadStuckInAModuleBehind) {
    struct Gate {
        std::mutex mu;
        std::condition_variable cv;
        bool open = false;
        bool entered = false;
        bool returned = false;
    };
    auto gate = std::make_shared<Gate>();
    auto finish_ran = std::make_shared<std::atomic<bool>>(false);
    std::future<size_t> stopped;
    {
        EventLoop loop;
        uint64_t now = 1000;
        auto pool =
            std::make_unique<OtherDatabases>(loop, 2, other_database_reply, [&now] { return now; });
        pool->start();
        ASSERT_TRUE(pool->submit_work(
            1, 1000,
            [gate, finish_ran]() -> OtherDatabases::Finish {
                std::unique_lock<std::mutex> lock(gate->mu);
                gate->entered = true;
                gate->cv.notify_all();
                gate->cv.wait_for(lock, std::chrono::seconds(30), [&] { return gate->open; });
                gate->returned = true;
                gate->cv.notify_all();
                return [finish_ran] { finish_ran->store(true); };
            },
            kLater));
        {
            std::unique_lock<std::mutex> lock(gate->mu);
            ASSERT_TRUE(
                gate->cv.wait_for(lock, std::chrono::seconds(10), [&] { return gate->entered; }));
        }
        stopped = std::async(std::launch::async, [&pool] { return pool->stop(50); });
        const bool returned =
            stopped.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
        if (!returned) {  // the old stop(): let it end, and fail
            {
                std::lock_guard<std::mutex> lock(gate->mu);
                gate->open = true;
            }
            gate->cv.notify_all();
            stopped.wait();
        }
        ASSERT_TRUE(returned) << "stop() waited for a thread stuck in a lookup";
        EXPECT_EQ(stopped.get(), 1u);  // the one stuck; the idle one was joined
        pool->drain([](uint64_t, std::vector<uint8_t>) { ADD_FAILURE() << "a reply after stop"; });
        pool.reset();  // the pool and its loop are gone while the lookup still runs
    }
    {
        std::unique_lock<std::mutex> lock(gate->mu);
        gate->open = true;
        gate->cv.notify_all();
        ASSERT_TRUE(
            gate->cv.wait_for(lock, std::chrono::seconds(10), [&] { return gate->returned; }));
    }
    // The late thread ends on its own block (ASan would see a touch of the freed pool);
    // its Finish is dropped, never run.
    EXPECT_FALSE(finish_ran->load());
}

}  // namespace
}  // namespace nscache::nscd
