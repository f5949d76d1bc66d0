// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/hosts_map.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace nscache::nssd {
namespace {

// Reads a slot as the NSS module does, without its seqlock loop (single-threaded here),
// through its own read-only mapping of the descriptor the socket hands out.
struct MapView {
    explicit MapView(const HostsMap& map) : size(map.size()) {
        base = static_cast<const uint8_t*>(mmap(nullptr, size, PROT_READ, MAP_SHARED, map.fd(), 0));
        EXPECT_NE(base, MAP_FAILED);
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
    HostsMap map;
    ASSERT_FALSE(map.create(64));
    const std::vector<uint8_t> payload = {1, 2, 3};
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                map.generation());
    map.publish(key_for("www.example.test", 10), NSCACHE_NSS_NODATA, 60, {}, 1000,
                map.generation());
    MapView view(map);
    EXPECT_EQ(view.header()->live, 1u);
    EXPECT_EQ(view.header()->map_id, map.id());
    EXPECT_NE(map.id(), 0u);
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
    EXPECT_EQ(view.header()->live, 0u);  // readers keep their mapping, and see it stopped
    EXPECT_EQ(map.fd(), -1);
}

// What the socket hands to every process: nobody can shrink it under the readers (SIGBUS),
// grow it, write it, punch holes in it, map it writable or unseal it; only the daemon's first
// mapping writes.
TEST(HostsMap, TheMapIsSealedAgainstEveryoneButItsOwnMapping) {
    HostsMap map;
    ASSERT_FALSE(map.create(64));
    const int fd = map.fd();
    ASSERT_GE(fd, 0);
    const int seals = fcntl(fd, F_GET_SEALS);
    EXPECT_EQ(seals & NSCACHE_MAP_SEALS, static_cast<int>(NSCACHE_MAP_SEALS));
    struct stat st;
    ASSERT_EQ(fstat(fd, &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));
    EXPECT_EQ(static_cast<size_t>(st.st_size), map.size());
    EXPECT_NE(ftruncate(fd, 0), 0);
    EXPECT_NE(ftruncate(fd, static_cast<off_t>(map.size() * 2)), 0);
    EXPECT_EQ(mmap(nullptr, map.size(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED);
    const uint8_t byte = 1;
    EXPECT_NE(pwrite(fd, &byte, 1, 0), 1);
    EXPECT_NE(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096), 0);
    EXPECT_NE(fcntl(fd, F_ADD_SEALS, 0), 0);  // F_SEAL_SEAL: the seals stay
    void* ro = mmap(nullptr, map.size(), PROT_READ, MAP_SHARED, fd, 0);
    ASSERT_NE(ro, MAP_FAILED);
    EXPECT_NE(mprotect(ro, map.size(), PROT_READ | PROT_WRITE), 0);
    munmap(ro, map.size());
    // The daemon's own mapping still writes.
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, std::vector<uint8_t>{1},
                1000, map.generation());
    MapView view(map);
    EXPECT_NE(view.find(key_for("www.example.test", 2)), nullptr);
}

// The host front's thread reads the generation before it looks an answer up and publishes later; a
// flush in between (the control thread) must leave that answer invalid.
TEST(HostsMap, AnswerLookedUpBeforeAFlushIsInvalidAfterIt) {
    HostsMap map;
    ASSERT_FALSE(map.create(64));
    const std::vector<uint8_t> payload = {1, 2, 3};
    const uint32_t before_flush = map.generation();
    map.invalidate_all();
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                before_flush);
    MapView view(map);
    EXPECT_EQ(view.find(key_for("www.example.test", 2)), nullptr);
    map.publish(key_for("www.example.test", 2), NSCACHE_NSS_FOUND, 300, payload, 1000,
                map.generation());
    EXPECT_NE(view.find(key_for("www.example.test", 2)), nullptr);
}

TEST(HostsMap, TooLargeOrZeroTtlIsNotPublished) {
    HostsMap map;
    ASSERT_FALSE(map.create(64));
    const std::vector<uint8_t> payload = {1};
    map.publish(key_for("big.example.test", 2), NSCACHE_NSS_FOUND, 300,
                std::vector<uint8_t>(NSCACHE_MAP_SLOT_SIZE, 0), 1000, map.generation());
    map.publish(key_for("zero.example.test", 2), NSCACHE_NSS_FOUND, 0, payload, 1000,
                map.generation());
    MapView view(map);
    EXPECT_EQ(view.find(key_for("big.example.test", 2)), nullptr);
    EXPECT_EQ(view.find(key_for("zero.example.test", 2)), nullptr);
}

}  // namespace
}  // namespace nscache::nssd
