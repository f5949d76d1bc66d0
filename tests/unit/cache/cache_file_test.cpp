// SPDX-License-Identifier: BSD-3-Clause
#include "cache/cache_file.h"

#include <gtest/gtest.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>

#include "cache_test_support.h"
#include "common/hash.h"
#include "dns/wire.h"

namespace nscache::cache {
namespace {

using cache::testing::ClientQuery;
using cache::testing::positive_answer;
using cache::testing::prepare;

constexpr uint64_t kNow = 5'000'000;
constexpr uint64_t kWall = 1'700'000'000'000;
constexpr cache::TtlPolicy kPolicy{};

class CacheFileTest : public ::testing::Test {
  protected:
    void SetUp() override { path_ = ::testing::TempDir() + "nscache_cache_file_test.bin"; }
    void TearDown() override {
        for (const std::string& p : {path_, path_ + ".tmp", victim(), path_ + ".link"}) {
            std::remove(p.c_str());
        }
    }
    std::string victim() const { return ::testing::TempDir() + "nscache_cache_file_victim"; }
    void write_file(const std::string& path, const std::string& text) {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
    }
    std::string read_file(const std::string& path) {
        std::ifstream in(path, std::ios::binary);
        return std::string((std::istreambuf_iterator<char>(in)), {});
    }

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
    ASSERT_TRUE(dumped.ok()) << dumped.error();
    EXPECT_EQ(dumped.value(), 101u);

    // Loaded 10 s later, in a new process whose monotonic clock starts elsewhere.
    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    const uint64_t later = 42'000;
    auto loaded = load_cache(after, path_, kPolicy, later, kWall + 10'000);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 100u);  // the 5 s entry expired in between
    auto r = find(after, "n7.example.test", later);
    ASSERT_EQ(r.freshness, cache::Freshness::Fresh);
    EXPECT_EQ(ttl_of(r, "n7.example.test"), 300u - 12u);  // 2 s before the dump + 10 s since
    EXPECT_EQ(find(after, "short.example.test", later).freshness, cache::Freshness::Miss);
}

TEST_F(CacheFileTest, DamagedFilesAreRejectedWhole) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 10; ++i) store(c, "n" + std::to_string(i) + ".example.test", 300, kNow);
    ASSERT_TRUE(dump_cache(c, path_, kNow, kWall).ok());
    std::ifstream in(path_, std::ios::binary);
    const std::vector<uint8_t> good((std::istreambuf_iterator<char>(in)), {});

    cache::Cache fresh(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto truncated = good;
    truncated.resize(good.size() / 2);
    EXPECT_FALSE(
        load_cache_bytes(fresh, truncated.data(), truncated.size(), kPolicy, kNow, kWall).ok());

    auto flipped = good;
    flipped[good.size() / 2] ^= 0x40;
    EXPECT_FALSE(
        load_cache_bytes(fresh, flipped.data(), flipped.size(), kPolicy, kNow, kWall).ok());

    const std::string foreign = "#!/bin/sh\necho this is not a cache file at all, friend\n";
    EXPECT_FALSE(load_cache_bytes(fresh, reinterpret_cast<const uint8_t*>(foreign.data()),
                                  foreign.size(), kPolicy, kNow, kWall)
                     .ok());
    EXPECT_EQ(fresh.counters().entries, 0u);
    EXPECT_FALSE(load_cache(fresh, "/nonexistent/file", kPolicy, kNow, kWall).ok());
}

TEST_F(CacheFileTest, DumpDoesNotWriteThroughSymlinks) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    store(c, "n.example.test", 300, kNow);
    write_file(victim(), "precious");
    // A link planted where the temporary file goes, and one at the target itself.
    ASSERT_EQ(symlink(victim().c_str(), (path_ + ".tmp").c_str()), 0);
    ASSERT_EQ(symlink(victim().c_str(), path_.c_str()), 0);
    auto dumped = dump_cache(c, path_, kNow, kWall);
    ASSERT_TRUE(dumped.ok()) << dumped.error();
    EXPECT_EQ(read_file(victim()), "precious");
    struct stat st {};
    ASSERT_EQ(lstat(path_.c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode)) << "the link at the target was not replaced";
    EXPECT_NE(lstat((path_ + ".tmp").c_str(), &st), 0) << "a temporary file was left behind";
}

TEST_F(CacheFileTest, LoadRefusesSymlinksAndFifos) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    store(c, "n.example.test", 300, kNow);
    ASSERT_TRUE(dump_cache(c, path_, kNow, kWall).ok());
    const std::string link = path_ + ".link";
    ASSERT_EQ(symlink(path_.c_str(), link.c_str()), 0);
    cache::Cache fresh(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded = load_cache(fresh, link, kPolicy, kNow, kWall);
    EXPECT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().find("symbolic link"), std::string::npos) << loaded.error();
    EXPECT_EQ(fresh.counters().entries, 0u);

    // A FIFO would block a plain open() until a writer comes: it is refused at once.
    ASSERT_EQ(mkfifo(victim().c_str(), 0600), 0);
    loaded = load_cache(fresh, victim(), kPolicy, kNow, kWall);
    EXPECT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().find("not a regular file"), std::string::npos) << loaded.error();
}

TEST_F(CacheFileTest, LoadAppliesTheTtlPolicy) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    store(before, "long.example.test", 86400, kNow);
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());

    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded =
        load_cache(after, path_, cache::TtlPolicy{.min_ttl = 0, .max_ttl = 60}, kNow, kWall);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 1u);
    auto r = find(after, "long.example.test", kNow);
    ASSERT_EQ(r.freshness, cache::Freshness::Fresh);
    EXPECT_EQ(ttl_of(r, "long.example.test"), 60u);
    // The entry's lifetime is clamped too, not only the TTL it shows.
    EXPECT_EQ(find(after, "long.example.test", kNow + 61'000).freshness, cache::Freshness::Miss);

    // min-ttl raises a short one the same way.
    cache::Cache raised(cache::CacheConfig{.budget_bytes = 1 << 20});
    store(before, "short.example.test", 5, kNow);
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());
    ASSERT_TRUE(
        load_cache(raised, path_, cache::TtlPolicy{.min_ttl = 30, .max_ttl = 60}, kNow, kWall)
            .ok());
    EXPECT_EQ(ttl_of(find(raised, "short.example.test", kNow), "short.example.test"), 30u);
}

// An NXDOMAIN's cut marker (cache/nxdomain_cut.h) is the cache's own: a dump leaves it out and
// counts only the entries it wrote, and the load rebuilds it from the NXDOMAIN.
TEST_F(CacheFileTest, NxdomainCutMarkersAreNotDumpedAndComeBackWithTheirNxdomain) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    ClientQuery gone("gone.example.test", dns::rtype::A);
    before.insert(cache::CacheKey{gone.lower.view(), dns::rtype::A, 1, 0},
                  *prepare(cache::testing::negative_answer("gone.example.test",
                                                           dns::Rcode::NxDomain, 300, 300),
                           kPolicy),
                  kNow);
    store(before, "kept.example.test", 300, kNow);
    auto dumped = dump_cache(before, path_, kNow, kWall);
    ASSERT_TRUE(dumped.ok()) << dumped.error();
    EXPECT_EQ(dumped.value(), 2u);

    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded = load_cache(after, path_, kPolicy, kNow, kWall);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 2u);
    ClientQuery below("a.gone.example.test", dns::rtype::A);
    const cache::CacheKey key{below.lower.view(), dns::rtype::A, 1, 0};
    EXPECT_EQ(after
                  .lookup_below_nxdomain(key, key.name.size() - 1, below.query(), kNow,
                                         cache::RenderLimits{}, out_)
                  .freshness,
              cache::Freshness::Fresh);
}

}  // namespace
}  // namespace nscache::cache

namespace nscache::cache {
namespace {

// An upstream's Extended DNS Errors are part of its cached answer, across a restart too.
TEST_F(CacheFileTest, ExtendedErrorsSurviveDumpAndLoad) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto answer = *prepare(positive_answer("ede.example.test", {300}), cache::TtlPolicy{});
    answer.ede = {0, 15, 0, 2, 0, 6};
    ClientQuery q("ede.example.test", dns::rtype::A);
    before.insert(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0}, answer, kNow);
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());
    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    ASSERT_TRUE(load_cache(after, path_, kPolicy, kNow, kWall).ok());
    std::vector<cache::EntrySnapshot> entries;
    for (size_t shard = 0; shard < after.shard_count(); ++shard) {
        for (size_t slice = 0; slice < after.slices_per_shard(); ++slice) {
            after.snapshot_slice(shard, slice, kNow, entries);
        }
    }
    ASSERT_EQ(entries.size(), 1u);
    EXPECT_EQ(entries[0].answer.ede, answer.ede);
}

// A file as the code wrote it before the checksum moved to common/hash.h (one entry, one
// shard, fixed clocks): it still loads, and the same cache is written byte for byte alike.
constexpr uint8_t kFileOfBefore[] = {
    0x4e, 0x53, 0x43, 0x41, 0x43, 0x48, 0x45, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00,
    0x15, 0x06, 0x67, 0x6f, 0x6c, 0x64, 0x65, 0x6e, 0x07, 0x65, 0x78, 0x61, 0x6d, 0x70, 0x6c, 0x65,
    0x04, 0x74, 0x65, 0x73, 0x74, 0x00, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01,
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x00, 0x01, 0x8b, 0xcf, 0xe5, 0x60, 0x30,
    0x00, 0x10, 0xc0, 0x0c, 0x00, 0x01, 0x00, 0x01, 0x00, 0x00, 0x01, 0x2c, 0x00, 0x04, 0xc0, 0x00,
    0x02, 0x01, 0x00, 0x01, 0x00, 0x06, 0x00, 0x45, 0x4e, 0x44, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    0x00, 0x00, 0x01, 0x05, 0x9c, 0xed, 0xfa, 0xaa, 0x06, 0x48, 0x6e};

TEST_F(CacheFileTest, AFileWrittenBeforeLoadsAndTheSameCacheIsWrittenAlike) {
    const std::string golden(reinterpret_cast<const char*>(kFileOfBefore), sizeof kFileOfBefore);
    write_file(path_, golden);
    cache::Cache loaded_into(cache::CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    const auto loaded = load_cache(loaded_into, path_, kPolicy, kNow + 2000, kWall);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 1u);
    EXPECT_EQ(find(loaded_into, "golden.example.test", kNow + 2000).freshness,
              cache::Freshness::Fresh);

    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    store(c, "golden.example.test", 300, kNow);
    ASSERT_TRUE(dump_cache(c, path_, kNow + 2000, kWall).ok());
    EXPECT_EQ(read_file(path_), golden);
    // The trailer's checksum: FNV-1a 64 of everything before it, big-endian.
    const size_t body = sizeof kFileOfBefore - 20;
    const uint8_t* trailer_checksum = kFileOfBefore + body + 12;
    const uint64_t checksum =
        uint64_t{dns::read_u32(trailer_checksum)} << 32 | dns::read_u32(trailer_checksum + 4);
    EXPECT_EQ(fnv1a(kFileOfBefore, body), checksum);
}

}  // namespace
}  // namespace nscache::cache

namespace nscache::cache {
namespace {

// --takeover hands the cache over as a dump in a memfd: written by one process, passed over
// SCM_RIGHTS and read by the next, its offset at the end where the writer left it.
TEST_F(CacheFileTest, DumpToAndLoadFromAMemfd) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 50; ++i)
        store(before, "m" + std::to_string(i) + ".example.test", 300, kNow);
    const int fd = memfd_create("nscache-cache", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    auto dumped = dump_cache_fd(before, fd, kNow + 2000, kWall);
    ASSERT_TRUE(dumped.ok()) << dumped.error();
    EXPECT_EQ(dumped.value(), 50u);
    const off_t end = lseek(fd, 0, SEEK_CUR);
    EXPECT_GT(end, 0);

    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded = load_cache_fd(after, fd, kPolicy, 42'000, kWall + 10'000);
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 50u);
    EXPECT_EQ(lseek(fd, 0, SEEK_CUR), end) << "the descriptor's offset moved";
    auto r = find(after, "m7.example.test", 42'000);
    ASSERT_EQ(r.freshness, cache::Freshness::Fresh);
    EXPECT_EQ(ttl_of(r, "m7.example.test"), 300u - 12u);

    // The same bytes as the path-based dump writes.
    ASSERT_TRUE(dump_cache(before, path_, kNow + 2000, kWall).ok());
    std::string in_memfd(static_cast<size_t>(end), '\0');
    ASSERT_EQ(pread(fd, in_memfd.data(), in_memfd.size(), 0), end);
    EXPECT_EQ(in_memfd, read_file(path_));
    close(fd);
}

TEST_F(CacheFileTest, LoadFromADescriptorChecksAsMuch) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 10; ++i) store(c, "n" + std::to_string(i) + ".example.test", 300, kNow);
    const int fd = memfd_create("nscache-cache", MFD_CLOEXEC);
    ASSERT_GE(fd, 0);
    ASSERT_TRUE(dump_cache_fd(c, fd, kNow, kWall).ok());
    const off_t size = lseek(fd, 0, SEEK_END);
    ASSERT_EQ(ftruncate(fd, size - 1), 0);  // the checksum's last byte lost
    cache::Cache fresh(cache::CacheConfig{.budget_bytes = 1 << 20});
    EXPECT_FALSE(load_cache_fd(fresh, fd, kPolicy, kNow, kWall).ok());
    ASSERT_EQ(ftruncate(fd, 0), 0);
    EXPECT_FALSE(load_cache_fd(fresh, fd, kPolicy, kNow, kWall).ok());
    close(fd);
    EXPECT_EQ(fresh.counters().entries, 0u);

    // Not a regular file: refused rather than read until its writer goes.
    int pipe_fds[2];
    ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
    auto loaded = load_cache_fd(fresh, pipe_fds[0], kPolicy, kNow, kWall);
    EXPECT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().find("not a regular file"), std::string::npos) << loaded.error();
    // A dump into a descriptor that cannot be written says so.
    EXPECT_FALSE(dump_cache_fd(c, pipe_fds[0], kNow, kWall).ok());
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    EXPECT_FALSE(load_cache_fd(fresh, -1, kPolicy, kNow, kWall).ok());
}

}  // namespace
}  // namespace nscache::cache

namespace nscache::cache {
namespace {

// At start the daemon leaves out what its routing answers itself as the file loads, instead
// of a pass over the filled cache after it: those entries are checked, not inserted, not
// counted.
TEST_F(CacheFileTest, LoadLeavesOutWhatTheSetCovers) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (const char* name :
         {"localhost", "a.localhost", "printer.lan", "kept.example.test", "sub.printer.lan"}) {
        store(before, name, 300, kNow);
    }
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());
    NameSet local;
    local.add_subtree(dns::name_from_text("localhost")->view());
    local.add_name(dns::name_from_text("printer.lan")->view());
    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded = load_cache(after, path_, kPolicy, kNow, kWall, LoadOptions{.leave_out = &local});
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), 2u);
    EXPECT_EQ(after.counters().entries, 2u);
    EXPECT_EQ(find(after, "kept.example.test", kNow).freshness, cache::Freshness::Fresh);
    EXPECT_EQ(find(after, "sub.printer.lan", kNow).freshness, cache::Freshness::Fresh);
    EXPECT_EQ(find(after, "localhost", kNow).freshness, cache::Freshness::Miss);
    EXPECT_EQ(find(after, "printer.lan", kNow).freshness, cache::Freshness::Miss);
}

// The review of issue 20 (finding 6): a [[forward]] rule's max-ttl and negative-max-ttl held
// for its upstream's answers but not for what a cache file (or a takeover) brought back.
TEST_F(CacheFileTest, LoadAppliesTheCapsOfEachEntrysDomain) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    store(before, "svc.cluster.local", 3600, kNow);
    store(before, "a.fast.cluster.local", 3600, kNow);
    store(before, "www.example.test", 3600, kNow);
    {
        ClientQuery q("gone.cluster.local", dns::rtype::A);
        before.insert(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0},
                      *prepare(cache::testing::negative_answer("gone.cluster.local",
                                                               dns::Rcode::NxDomain, 3600, 3600),
                               cache::TtlPolicy{}),
                      kNow);
    }
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());

    DomainTtlCaps caps;
    caps.add(dns::name_from_text("cluster.local")->view(),
             DomainTtlCaps::Caps{.max_ttl = 30, .negative_max_ttl = 10});
    // A rule under it without caps of its own: the longer domain wins, as in the routing.
    caps.add(dns::name_from_text("fast.cluster.local")->view(), DomainTtlCaps::Caps{});
    for (bool is_private : {true, false}) {
        cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
        auto loaded = load_cache(after, path_, kPolicy, kNow, kWall,
                                 LoadOptions{.ttl_caps = &caps, .cache_is_private = is_private});
        ASSERT_TRUE(loaded.ok()) << loaded.error();
        EXPECT_EQ(loaded.value(), 4u);
        EXPECT_EQ(ttl_of(find(after, "svc.cluster.local", kNow), "svc.cluster.local"), 30u);
        EXPECT_EQ(find(after, "svc.cluster.local", kNow + 31'000).freshness,
                  cache::Freshness::Miss);
        EXPECT_EQ(ttl_of(find(after, "a.fast.cluster.local", kNow), "a.fast.cluster.local"), 3600u);
        EXPECT_EQ(ttl_of(find(after, "www.example.test", kNow), "www.example.test"), 3600u);
        EXPECT_EQ(find(after, "gone.cluster.local", kNow + 5'000).freshness,
                  cache::Freshness::Fresh);
        EXPECT_EQ(find(after, "gone.cluster.local", kNow + 11'000).freshness,
                  cache::Freshness::Miss);
    }
}

// A file whose checksum holds but whose last entry is broken (written by someone who knows
// the format): nothing of it goes in, not even the good entries before the broken one.
TEST_F(CacheFileTest, ABrokenEntryAfterGoodOnesKeepsTheWholeFileOut) {
    cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 20; ++i) store(c, "n" + std::to_string(i) + ".example.test", 300, kNow);
    ASSERT_TRUE(dump_cache(c, path_, kNow, kWall).ok());
    std::string bytes = read_file(path_);
    // The last entry's last byte before the trailer is its EDE length: claim one byte more
    // than the entry has, then seal the file with a checksum that matches again.
    const size_t body = bytes.size() - 20;
    bytes[body - 1] = 1;
    const uint64_t sum = fnv1a(reinterpret_cast<const uint8_t*>(bytes.data()), body);
    for (int i = 0; i < 8; ++i) bytes[body + 12 + i] = static_cast<char>(sum >> (56 - 8 * i));
    const auto* data = reinterpret_cast<const uint8_t*>(bytes.data());
    cache::Cache fresh(cache::CacheConfig{.budget_bytes = 1 << 20});
    EXPECT_FALSE(load_cache_bytes(fresh, data, bytes.size(), kPolicy, kNow, kWall).ok());
    EXPECT_EQ(fresh.counters().entries, 0u);
    // At start (one pass, inserting as it checks) the good entries went in, then out again.
    EXPECT_FALSE(load_cache_bytes(fresh, data, bytes.size(), kPolicy, kNow, kWall,
                                  LoadOptions{.cache_is_private = true})
                     .ok());
    EXPECT_EQ(fresh.counters().entries, 0u);
    // A cache that holds something already is never emptied for it: checked first.
    store(fresh, "mine.example.test", 300, kNow);
    EXPECT_FALSE(load_cache_bytes(fresh, data, bytes.size(), kPolicy, kNow, kWall,
                                  LoadOptions{.cache_is_private = true})
                     .ok());
    EXPECT_EQ(fresh.counters().entries, 1u);
    EXPECT_EQ(find(fresh, "mine.example.test", kNow).freshness, cache::Freshness::Fresh);
}

}  // namespace
}  // namespace nscache::cache

namespace nscache::cache {
namespace {

TEST_F(CacheFileTest, APrivateLoadInsertsWhatASharedOneDoes) {
    cache::Cache before(cache::CacheConfig{.budget_bytes = 1 << 20});
    for (int i = 0; i < 300; ++i)
        store(before, "p" + std::to_string(i) + ".example.test", 300, kNow);
    store(before, "short.example.test", 5, kNow);
    ASSERT_TRUE(dump_cache(before, path_, kNow, kWall).ok());
    cache::Cache shared(cache::CacheConfig{.budget_bytes = 1 << 20});
    cache::Cache alone(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto a = load_cache(shared, path_, kPolicy, kNow, kWall + 10'000);
    auto b = load_cache(alone, path_, kPolicy, kNow, kWall + 10'000,
                        LoadOptions{.cache_is_private = true});
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(a.value(), 300u);
    EXPECT_EQ(b.value(), 300u);
    EXPECT_EQ(alone.counters().entries, shared.counters().entries);
    EXPECT_EQ(ttl_of(find(alone, "p299.example.test", kNow), "p299.example.test"), 290u);
    EXPECT_EQ(find(alone, "short.example.test", kNow).freshness, cache::Freshness::Miss);

    // One pass checks the checksum as it goes: a flipped bit is found at the end, after the
    // entries before it went in, and they go out again.
    std::string bytes = read_file(path_);
    bytes[bytes.size() / 2] ^= 0x01;
    cache::Cache damaged(cache::CacheConfig{.budget_bytes = 1 << 20});
    auto loaded =
        load_cache_bytes(damaged, reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(),
                         kPolicy, kNow, kWall, LoadOptions{.cache_is_private = true});
    ASSERT_FALSE(loaded.ok());
    EXPECT_NE(loaded.error().find("checksum"), std::string::npos) << loaded.error();
    EXPECT_EQ(damaged.counters().entries, 0u);
}

}  // namespace
}  // namespace nscache::cache
