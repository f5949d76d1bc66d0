// SPDX-License-Identifier: BSD-3-Clause
#include "common/mailbox.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace nscache {
namespace {

TEST(Mailbox, DrainsInPostOrderOnTheLoopsThread) {
    EventLoop loop;
    Mailbox<int> box(loop);
    EXPECT_TRUE(box.post(1));
    EXPECT_TRUE(box.post(2));
    std::vector<int> seen;
    loop.run_once(0, [&] { box.drain([&](int& v) { seen.push_back(v); }); });
    EXPECT_EQ(seen, (std::vector<int>{1, 2}));
    seen.clear();
    box.drain([&](int& v) { seen.push_back(v); });
    EXPECT_TRUE(seen.empty());  // a batch is drained once
}

TEST(Mailbox, AnItemPostedFromAnotherThreadWakesTheLoop) {
    EventLoop loop;
    Mailbox<std::string> box(loop);
    std::thread poster([&] { box.post("from another thread"); });
    poster.join();
    std::vector<std::string> seen;
    // The wake-up is the only event: without it run_once would wait out its 5 s.
    loop.run_once(5000, [&] { box.drain([&](std::string& v) { seen.push_back(v); }); });
    EXPECT_EQ(seen, (std::vector<std::string>{"from another thread"}));
}

TEST(Mailbox, APostFromADrainCallbackLandsInTheNextBatch) {
    EventLoop loop;
    Mailbox<int> box(loop);
    box.post(1);
    std::vector<int> seen;
    box.drain([&](int& v) {
        seen.push_back(v);
        if (v == 1) box.post(2);
    });
    EXPECT_EQ(seen, (std::vector<int>{1}));
    box.drain([&](int& v) { seen.push_back(v); });
    EXPECT_EQ(seen, (std::vector<int>{1, 2}));
}

TEST(Mailbox, TakeLatestKeepsOnlyTheLastOfABatch) {
    EventLoop loop;
    Mailbox<int> box(loop);
    int out = 0;
    EXPECT_FALSE(box.take_latest(out));
    box.post(1);
    box.post(2);
    box.post(3);
    EXPECT_TRUE(box.take_latest(out));
    EXPECT_EQ(out, 3);
    EXPECT_FALSE(box.take_latest(out));
}

TEST(Mailbox, ClosedRefusesNewPostsButKeepsWhatWasPosted) {
    EventLoop loop;
    Mailbox<int> box(loop);
    box.post(1);
    box.close();
    EXPECT_FALSE(box.post(2));
    std::vector<int> seen;
    box.drain([&](int& v) { seen.push_back(v); });
    EXPECT_EQ(seen, (std::vector<int>{1}));
}

}  // namespace
}  // namespace nscache
