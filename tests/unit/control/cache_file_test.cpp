#include "control/cache_file.h"

#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "../cache/cache_test_support.h"

namespace nscache::control {
namespace {

using cache::testing::ClientQuery;
using cache::testing::positive_answer;
using cache::testing::prepare;

constexpr uint64_t kNow = 5'000'000;
constexpr uint64_t kWall = 1'700'000'000'000;

class CacheFileTest : public ::testing::Test {
  protected:
    void SetUp() override { path_ = ::testing::TempDir() + "nscache_cache_file_test.bin"; }
    void TearDown() override { std::remove(path_.c_str()); }

    void store(cache::Cache& c, const std::string& name, uint32_t ttl, uint64_t now) {
        ClientQuery q(name, dns::rtype::A);
        c.insert(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0},
                 *prepare(positive_answer(name, {ttl}), cache::TtlPolicy{}), now);
    }
    cache::LookupResult find(cache::Cache& c, const std::string& name, uint64_t now) {
        ClientQuery q(name, dns::rtype::A);
        return c.lookup(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0}, q.query(), now,
                        cache::RenderLimits{}, out_, false);
    }
    uint32_t ttl_of(const cache::LookupResult& r, const std::string& name) {
        EXPECT_GT(r.length, 0u);
        return dns::read_u32(&out_[12 + dns::name_from_text(name)->length + 4 + 6]);
    }

    std::string path_;
    std::array<uint8_t, 4096> out_{};
};

TEST_F(CacheFileTest, RoundTripKeepsUnexpiredEntriesWithRemainingTtl) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 100; ++i)
        store(before, "n" + std::to_string(i) + ".example.test", 300, kNow);
    store(before, "short.example.test", 5, kNow);
    auto dumped = dump_cache(before, path_, kNow + 2000, kWall);
    ASSERT_TRUE(dumped.ok) << dumped.error;
    EXPECT_EQ(dumped.entries, 101u);

    // Loaded 10 s later, in a new process whose monotonic clock starts elsewhere.
    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    const uint64_t later = 42'000;
    auto loaded = load_cache(after, path_, later, kWall + 10'000);
    ASSERT_TRUE(loaded.ok) << loaded.error;
    EXPECT_EQ(loaded.entries, 100u);  // the 5 s entry expired in between
    auto r = find(after, "n7.example.test", later);
    ASSERT_EQ(r.freshness, cache::Freshness::Fresh);
    EXPECT_EQ(ttl_of(r, "n7.example.test"), 300u - 12u);  // 2 s before the dump + 10 s since
    EXPECT_EQ(find(after, "short.example.test", later).freshness, cache::Freshness::Miss);
}

TEST_F(CacheFileTest, DamagedFilesAreRejectedWhole) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 10; ++i) store(c, "n" + std::to_string(i) + ".example.test", 300, kNow);
    ASSERT_TRUE(dump_cache(c, path_, kNow, kWall).ok);
    std::ifstream in(path_, std::ios::binary);
    const std::vector<uint8_t> good((std::istreambuf_iterator<char>(in)), {});

    cache::Cache fresh(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto truncated = good;
    truncated.resize(good.size() / 2);
    EXPECT_FALSE(load_cache_bytes(fresh, truncated.data(), truncated.size(), kNow, kWall).ok);

    auto flipped = good;
    flipped[good.size() / 2] ^= 0x40;
    EXPECT_FALSE(load_cache_bytes(fresh, flipped.data(), flipped.size(), kNow, kWall).ok);

    const std::string foreign = "#!/bin/sh\necho this is not a cache file at all, friend\n";
    EXPECT_FALSE(load_cache_bytes(fresh, reinterpret_cast<const uint8_t*>(foreign.data()),
                                  foreign.size(), kNow, kWall)
                     .ok);
    EXPECT_EQ(fresh.counters().entries, 0u);
    EXPECT_FALSE(load_cache(fresh, "/nonexistent/file", kNow, kWall).ok);
}

}  // namespace
}  // namespace nscache::control
