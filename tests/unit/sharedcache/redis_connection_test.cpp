// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/redis_connection.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "fake_redis.h"

namespace nscache::sharedcache {
namespace {

using testing::FakeRedis;

struct Heard {
    uint64_t token;
    bool null;
    int type;
    size_t elements;
};

struct Recorder final : RedisConnection::Listener {
    std::vector<Heard> heard;
    void on_reply(RedisConnection&, uint64_t token, const redisReply* reply) override {
        heard.push_back(
            {token, reply == nullptr, reply ? reply->type : 0, reply ? reply->elements : 0});
    }
};

struct Harness {
    Harness() : connection(loop, recorder) {}

    bool run_until(const std::function<bool()>& done, int turns = 400) {
        for (int i = 0; i < turns; ++i) {
            if (done()) return true;
            loop.run_once(5);
        }
        return done();
    }

    std::optional<FakeRedis::Command> next(FakeRedis& redis) {
        std::optional<FakeRedis::Command> c;
        run_until([&] { return (c = redis.take()).has_value(); });
        return c;
    }

    EventLoop loop;
    Recorder recorder;
    RedisConnection connection;
};

// "*N\r\n" followed by N integers.
std::string int_array(size_t n) {
    std::string s = "*" + std::to_string(n) + "\r\n";
    for (size_t i = 0; i < n; ++i) s += ":1\r\n";
    return s;
}

TEST(RedisConnection, AReplyOfTheCommandsTypeIsDelivered) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(h.connection.command({"CLUSTER", "SLOTS"}, 1, RedisConnection::kArrayReply));
    ASSERT_TRUE(
        h.connection.command({"GETRANGE", "k", "0", "9"}, 2, RedisConnection::kStringReply));
    auto slots = h.next(redis);
    ASSERT_TRUE(slots);
    redis.reply(*slots, int_array(1000) + FakeRedis::bulk("v"));
    ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 2; }));
    EXPECT_FALSE(h.recorder.heard[0].null);
    EXPECT_EQ(h.recorder.heard[0].elements, 1000u);
    EXPECT_EQ(h.recorder.heard[1].type, REDIS_REPLY_STRING);
    EXPECT_TRUE(h.connection.usable());
}

// GETRANGE never answers with an array. hiredis 0.14 keeps every parsed element of an
// unfinished one with no bound: a server streaming "*2000000000" and then integers grew the
// daemon by 690 MB for 40 MB sent. The array's first byte now ends the connection.
TEST(RedisConnection, AReplyOfAnotherTypeDropsTheConnectionAtItsFirstByte) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(
        h.connection.command({"GETRANGE", "k", "0", "9"}, 1, RedisConnection::kStringReply));
    ASSERT_TRUE(
        h.connection.command({"GETRANGE", "k", "0", "9"}, 2, RedisConnection::kStringReply));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    redis.reply(*get, "*2000000000\r\n:1\r\n:1\r\n");  // never finished
    ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 2; }));
    EXPECT_TRUE(h.recorder.heard[0].null);
    EXPECT_TRUE(h.recorder.heard[1].null);
    EXPECT_FALSE(h.connection.usable());
}

TEST(RedisConnection, AStatusOrIntegerForAStringCommandDropsTheConnection) {
    for (const char* wrong : {"+OK\r\n", ":12\r\n"}) {
        FakeRedis redis;
        Harness h;
        ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
        ASSERT_TRUE(
            h.connection.command({"GETRANGE", "k", "0", "9"}, 1, RedisConnection::kStringReply));
        auto get = h.next(redis);
        ASSERT_TRUE(get);
        redis.reply(*get, wrong);
        ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 1; })) << wrong;
        EXPECT_TRUE(h.recorder.heard[0].null) << wrong;
    }
}

TEST(RedisConnection, AnErrorIsAlwaysAnAnswer) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(
        h.connection.command({"GETRANGE", "k", "0", "9"}, 1, RedisConnection::kStringReply));
    auto get = h.next(redis);
    ASSERT_TRUE(get);
    redis.reply(*get, "-LOADING Redis is loading the dataset in memory\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 1; }));
    EXPECT_FALSE(h.recorder.heard[0].null);
    EXPECT_EQ(h.recorder.heard[0].type, REDIS_REPLY_ERROR);
    EXPECT_TRUE(h.connection.usable());
}

// Where an array is the answer (CLUSTER SLOTS), what it may announce is bounded: elements in
// all its levels together, and bytes of its strings.
TEST(RedisConnection, AnArrayAnnouncingTooManyElementsDropsTheConnection) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(h.connection.command({"CLUSTER", "SLOTS"}, 1, RedisConnection::kArrayReply));
    auto slots = h.next(redis);
    ASSERT_TRUE(slots);
    redis.reply(*slots,
                "*" + std::to_string(RedisConnection::kMaxReplyElements + 1) + "\r\n:1\r\n");
    ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 1; }));
    EXPECT_TRUE(h.recorder.heard[0].null);
}

TEST(RedisConnection, NestedArraysCountTowardsOneBound) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(h.connection.command({"CLUSTER", "SLOTS"}, 1, RedisConnection::kArrayReply));
    auto slots = h.next(redis);
    ASSERT_TRUE(slots);
    // Each level is small; together they pass the bound.
    const size_t inner = 4096;
    const size_t outer = RedisConnection::kMaxReplyElements / inner + 1;
    redis.reply(*slots, "*" + std::to_string(outer) + "\r\n*" + std::to_string(inner) + "\r\n");
    std::string rest;
    for (size_t i = 0; i < inner; ++i) rest += ":1\r\n";
    for (size_t i = 1; i < outer; ++i) rest += "*" + std::to_string(inner) + "\r\n";
    redis.reply(*slots, rest);
    ASSERT_TRUE(h.run_until([&] { return h.recorder.heard.size() == 1; }));
    EXPECT_TRUE(h.recorder.heard[0].null);
}

TEST(RedisConnection, StringsOfOneReplyAreBoundedInBytes) {
    FakeRedis redis;
    Harness h;
    ASSERT_TRUE(h.connection.open(RedisEndpoint{redis.address, {}}));
    ASSERT_TRUE(h.connection.command({"CLUSTER", "SLOTS"}, 1, RedisConnection::kArrayReply));
    auto slots = h.next(redis);
    ASSERT_TRUE(slots);
    // 16 KiB a turn: what hiredis reads in one, so the test's blocking send never fills up.
    const std::string chunk(16 * 1024, 'x');
    const size_t count = RedisConnection::kMaxReplyBytes / chunk.size() + 1;
    redis.reply(*slots, "*" + std::to_string(count) + "\r\n");
    // Written as the connection drains them; stops once the daemon side has gone.
    size_t sent = 0;
    ASSERT_TRUE(h.run_until(
        [&] {
            if (sent < count) {
                redis.reply(*slots, FakeRedis::bulk(chunk));
                ++sent;
            }
            return h.recorder.heard.size() == 1;
        },
        4000));
    EXPECT_TRUE(h.recorder.heard[0].null);
}

}  // namespace
}  // namespace nscache::sharedcache
