// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/cluster_slots.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <memory>
#include <string>

namespace nscache::sharedcache {
namespace {

// A reply as hiredis parses it from `resp`.
struct ParsedReply {
    std::unique_ptr<redisReply, decltype(&freeReplyObject)> reply{nullptr, freeReplyObject};
    explicit ParsedReply(const std::string& resp) {
        redisReader* reader = redisReaderCreate();
        redisReaderFeed(reader, resp.data(), resp.size());
        void* out = nullptr;
        EXPECT_EQ(redisReaderGetReply(reader, &out), REDIS_OK);
        reply.reset(static_cast<redisReply*>(out));
        redisReaderFree(reader);
    }
};

// Values from the Redis Cluster specification and `CLUSTER KEYSLOT`.
TEST(KeySlot, MatchesRedis) {
    EXPECT_EQ(key_slot("123456789"), 0x31C3 % kClusterSlots);  // the spec's CRC16 check value
    EXPECT_EQ(key_slot("foo"), 12182);
    EXPECT_EQ(key_slot("bar"), 5061);
    EXPECT_EQ(key_slot("somekey"), 11058);
}

TEST(KeySlot, HashTags) {
    EXPECT_EQ(key_slot("{user1000}.following"), key_slot("user1000"));
    EXPECT_EQ(key_slot("{user1000}.followers"), key_slot("user1000"));
    EXPECT_EQ(key_slot("foo{}{bar}"), key_slot("foo{}{bar}"));  // empty tag: the whole key
    EXPECT_NE(key_slot("foo{}{bar}"), key_slot("bar"));
    EXPECT_EQ(key_slot("foo{{bar}}zap"), key_slot("{bar"));
    EXPECT_EQ(key_slot("foo{bar}{zap}"), key_slot("bar"));
}

TEST(Redirect, MovedAndAsk) {
    auto moved = parse_redirect("MOVED 3999 127.0.0.1:6381");
    ASSERT_TRUE(moved);
    EXPECT_FALSE(moved->ask);
    EXPECT_EQ(moved->slot, 3999);
    EXPECT_EQ(moved->node.to_string(), "127.0.0.1:6381");
    auto ask = parse_redirect("ASK 1 ::1:7000");
    ASSERT_TRUE(ask);
    EXPECT_TRUE(ask->ask);
    EXPECT_EQ(ask->node.to_string(), "[::1]:7000");
    EXPECT_FALSE(parse_redirect("ERR unknown command"));
    EXPECT_FALSE(parse_redirect("MOVED 16384 127.0.0.1:6381"));  // no such slot
    EXPECT_FALSE(parse_redirect("MOVED 1 redis-node-2:6381"));   // host names are not resolved
    EXPECT_FALSE(parse_redirect("MOVED 1"));
}

TEST(ClusterSlots, RangesWithIpMasters) {
    ParsedReply r(
        "*3\r\n"
        "*4\r\n:0\r\n:5460\r\n*3\r\n$9\r\n127.0.0.1\r\n:7000\r\n$2\r\nid\r\n"
        "*3\r\n$9\r\n127.0.0.1\r\n:7003\r\n$2\r\nr1\r\n"
        "*3\r\n:5461\r\n:10922\r\n*2\r\n$3\r\n::1\r\n:7001\r\n"
        "*3\r\n:10923\r\n:16383\r\n*2\r\n$1\r\n?\r\n:7002\r\n");
    auto ranges = parse_cluster_slots(*r.reply);
    ASSERT_TRUE(ranges);
    ASSERT_EQ(ranges->size(), 2u);  // the "?" (unknown endpoint) range stays unrouted
    EXPECT_EQ((*ranges)[0].first, 0);
    EXPECT_EQ((*ranges)[0].last, 5460);
    EXPECT_EQ((*ranges)[0].master.to_string(), "127.0.0.1:7000");
    EXPECT_EQ((*ranges)[1].master.to_string(), "[::1]:7001");
}

TEST(ClusterSlots, ShapesThatAreNotASlotMap) {
    EXPECT_FALSE(parse_cluster_slots(*ParsedReply("+OK\r\n").reply));
    EXPECT_FALSE(parse_cluster_slots(*ParsedReply("*1\r\n:1\r\n").reply));
    EXPECT_FALSE(parse_cluster_slots(
        *ParsedReply("*1\r\n*3\r\n:10\r\n:5\r\n*2\r\n$1\r\na\r\n:1\r\n").reply));
    EXPECT_FALSE(parse_cluster_slots(
        *ParsedReply("*1\r\n*3\r\n:0\r\n:16384\r\n*2\r\n$9\r\n127.0.0.1\r\n:1\r\n").reply));
}

}  // namespace
}  // namespace nscache::sharedcache
