#include "server/hosts_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace nscache::server {
namespace {

// Reads a slot as the NSS module does, without its seqlock loop (single-threaded here).
struct MapView {
    explicit MapView(const std::string& path) {
        const int fd = open(path.c_str(), O_RDONLY);
        size = static_cast<size_t>(lseek(fd, 0, SEEK_END));
        base = static_cast<const uint8_t*>(mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0));
        close(fd);
    }
    ~MapView() { munmap(const_cast<uint8_t*>(base), size); }
    const nscache_map_header* header() const {
        return reinterpret_cast<const nscache_map_header*>(base);
    }
    const nscache_map_slot* find(const std::vector<uint8_t>& key) const {
        const uint64_t hash = nscache_map_hash(key.data(), key.size());
        const uint32_t first = nscache_map_slot_index(hash, header()->slot_count);
        for (uint32_t i : {first, first ^ 1u}) {
            const auto* s = reinterpret_cast<const nscache_map_slot*>(
                base + sizeof(nscache_map_header) + size_t{i} * NSCACHE_MAP_SLOT_SIZE);
            if (s->key_hash == hash && s->key_len == key.size() &&
                std::memcmp(s + 1, key.data(), key.size()) == 0 &&
                s->generation == header()->generation && (s->seq & 1) == 0) {
                return s;
            }
        }
        return nullptr;
    }
    const uint8_t* base;
    size_t size;
};

std::vector<uint8_t> key_for(const std::string& name, int family) {
    std::vector<uint8_t> key(NSCACHE_MAP_KEY_MAX);
    key.resize(nscache_map_key(key.data(), NSCACHE_NSS_BY_NAME, family,
                               reinterpret_cast<const uint8_t*>(name.data()), name.size()));
    return key;
}

TEST(HostsMap, PublishedSlotsAreFoundUntilAFlush) {
    const std::string path = ::testing::TempDir() + "nscache_hosts_map_test.map";
    HostsMap map;
    ASSERT_FALSE(map.create(path, 64));
    const std::vector<uint8_t> payload = {1, 2, 3};
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                map.generation());
    map.publish(key_for("www.example.test", 10), NSCACHE_NSS_NODATA, 60, {}, 1000,
                map.generation());
    MapView view(path);
    EXPECT_EQ(view.header()->live, 1u);
    // Keys are case-insensitive and ignore a trailing dot.
    const auto* s = view.find(key_for("WWW.example.test.", 2));
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->status, NSCACHE_NSS_FOUND);
    EXPECT_EQ(s->expires_ms, 1000 + 300'000);
    EXPECT_EQ(s->payload_len, 3u);
    EXPECT_NE(view.find(key_for("www.example.test", 10)), nullptr);
    EXPECT_EQ(view.find(key_for("www.example.test", 0)), nullptr);
    map.invalidate_all();
    EXPECT_EQ(view.find(key_for("www.example.test", 2)), nullptr);
    map.close();
    EXPECT_EQ(view.header()->live, 0u);
    EXPECT_NE(access(path.c_str(), F_OK), 0);
}

// The NSS thread reads the generation before it looks an answer up and publishes later; a
// flush in between (the control thread) must leave that answer invalid.
TEST(HostsMap, AnswerLookedUpBeforeAFlushIsInvalidAfterIt) {
    const std::string path = ::testing::TempDir() + "nscache_hosts_map_test3.map";
    HostsMap map;
    ASSERT_FALSE(map.create(path, 64));
    const std::vector<uint8_t> payload = {1, 2, 3};
    const uint32_t before_flush = map.generation();
    map.invalidate_all();
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                before_flush);
    MapView view(path);
    EXPECT_EQ(view.find(key_for("www.example.test", 2)), nullptr);
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                map.generation());
    EXPECT_NE(view.find(key_for("www.example.test", 2)), nullptr);
}

TEST(HostsMap, TooLargeOrZeroTtlIsNotPublished) {
    const std::string path = ::testing::TempDir() + "nscache_hosts_map_test2.map";
    HostsMap map;
    ASSERT_FALSE(map.create(path, 64));
    const std::vector<uint8_t> payload = {1};
    map.publish(key_for("big.example.test", 2), NSCACHE_NSS_FOUND, 300,
                std::vector<uint8_t>(NSCACHE_MAP_SLOT_SIZE, 0), 1000, map.generation());
    map.publish(key_for("zero.example.test", 2), NSCACHE_NSS_FOUND, 0, payload, 1000,
                map.generation());
    MapView view(path);
    EXPECT_EQ(view.find(key_for("big.example.test", 2)), nullptr);
    EXPECT_EQ(view.find(key_for("zero.example.test", 2)), nullptr);
}

}  // namespace
}  // namespace nscache::server
