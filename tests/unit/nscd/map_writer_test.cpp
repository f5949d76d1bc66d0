// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/map_writer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstring>
#include <set>
#include <string>

namespace nscache::nscd {
namespace {

// What glibc's client does with the descriptor GETFDHST hands out: map it read-only and walk
// the bucket's chain (nscd_helper.c __nscd_cache_search), taking the first usable match.
class Reader {
  public:
    explicit Reader(const MapFile& map) : size_(map.map_size()) {
        base_ = mmap(nullptr, size_, PROT_READ, MAP_SHARED, map.reader_fd(), 0);
    }
    ~Reader() { munmap(base_, size_); }
    const MapHead* head() const { return static_cast<const MapHead*>(base_); }

    // The response of (type, key), or "" when the map has no usable record of it.
    std::string find(RequestType type, const std::string& key) const {
        const MapHead* h = head();
        const auto* buckets = reinterpret_cast<const uint32_t*>(h + 1);
        const uint8_t* data = static_cast<const uint8_t*>(base_) + sizeof(MapHead) +
                              round_up(size_t(h->module) * 4, kAlign);
        const auto* k = reinterpret_cast<const uint8_t*>(key.data());
        uint32_t work = buckets[key_hash(k, key.size()) % uint32_t(h->module)];
        while (work != kEndRef) {
            EXPECT_EQ(work % 8, 0u);
            const auto* he = reinterpret_cast<const HashEntry*>(data + work);
            if (he->type == type && size_t(he->len) == key.size() &&
                std::memcmp(data + he->key, key.data(), key.size()) == 0) {
                EXPECT_EQ(he->packet % 8, 0u);
                const auto* dh = reinterpret_cast<const DataHead*>(data + he->packet);
                if (dh->usable) {
                    return std::string(reinterpret_cast<const char*>(dh + 1), size_t(dh->recsize));
                }
            }
            work = he->next;
        }
        return "";
    }

  private:
    size_t size_;
    void* base_;
};

std::span<const uint8_t> bytes(const std::string& s) {
    return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

TEST(MapWriter, PublishedRecordsAreFoundInTheClientsLayout) {
    MapWriter w;
    ASSERT_FALSE(w.open(1000));
    Reader r(*w.current());
    EXPECT_EQ(r.head()->version, 2);
    EXPECT_EQ(r.head()->header_size, 120);
    EXPECT_EQ(r.head()->gc_cycle % 2, 0);
    const std::string key("www.example.test", 17);  // with its NUL
    EXPECT_EQ(r.find(GETAI, key), "");
    ASSERT_TRUE(w.publish(GETAI, bytes(key), bytes("reply-1"), 60, 5000, 1000));
    EXPECT_EQ(r.find(GETAI, key), "reply-1");
    EXPECT_EQ(r.find(GETHOSTBYNAME, key), "");  // another request type, another record
    // A replacement is found at once; the old record is never found again.
    ASSERT_TRUE(w.publish(GETAI, bytes(key), bytes("reply-2"), 60, 6000, 1001));
    EXPECT_EQ(r.find(GETAI, key), "reply-2");
    EXPECT_EQ(w.entries(), 1u);
}

TEST(MapWriter, RecordsLeaveTheMapExactlyWhenTheirTtlRunsOut) {
    MapWriter w;
    ASSERT_FALSE(w.open(1000));
    Reader r(*w.current());
    ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes("A"), 5, 10'000, 1000));
    ASSERT_TRUE(w.publish(GETAI, bytes("b"), bytes("B"), 2, 10'000, 1000));
    EXPECT_EQ(w.expire(11'999), 12'000u);
    EXPECT_EQ(r.find(GETAI, "b"), "B");
    EXPECT_EQ(w.expire(12'000), 15'000u);
    EXPECT_EQ(r.find(GETAI, "b"), "");
    EXPECT_EQ(r.find(GETAI, "a"), "A");
    EXPECT_EQ(w.expire(15'000), 0u);
    EXPECT_EQ(r.find(GETAI, "a"), "");
}

TEST(MapWriter, AFullMapRotatesToANewOneAndTellsClientsTheOldIsStale) {
    MapWriter w(MapOptions{.module = 7, .data_size = 4096});
    ASSERT_FALSE(w.open(1000));
    const MapFile* first = w.current();
    Reader old_reader(*first);
    ASSERT_TRUE(w.publish(GETAI, bytes("keep"), bytes("K"), 600, 0, 1000));
    std::string churn;
    for (int i = 0; i < 200 && w.rotations() == 0; ++i) {
        churn = std::string(100, i % 2 == 0 ? 'x' : 'y');  // a changed answer: a new record
        ASSERT_TRUE(w.publish(GETAI, bytes("churn"), bytes(churn), 600, 0, 1000));
    }
    ASSERT_EQ(w.rotations(), 1u);
    EXPECT_EQ(old_reader.head()->timestamp, 0u);     // clients ask for the new map
    EXPECT_EQ(old_reader.find(GETAI, "keep"), "K");  // and the old one stays intact meanwhile
    Reader r(*w.current());
    EXPECT_NE(r.head()->timestamp, 0u);
    EXPECT_EQ(r.find(GETAI, "keep"), "K");
    EXPECT_EQ(r.find(GETAI, "churn"), churn);
}

TEST(MapWriter, CertainlyRunningOnlyWhileTheWriterHasTheMap) {
    MapWriter w(MapOptions{.module = 7, .data_size = 4096});
    ASSERT_FALSE(w.open(1000));
    Reader first(*w.current());
    // The guard holds the flag: clients skip their clock check, and the timestamp alone would
    // call the map stale (as it will the moment the process dies and the kernel clears the
    // flag).
    EXPECT_EQ(first.head()->nscd_certainly_running, 1);
    EXPECT_LT(first.head()->timestamp + kMappingTimeout, 1000u);
    w.flush(1001);  // a rotation
    Reader second(*w.current());
    EXPECT_EQ(first.head()->nscd_certainly_running, 0);
    EXPECT_EQ(first.head()->timestamp, 0u);
    // The rotation does not wait for the guard threads (ARotationNeverWaitsForTheGuard).
    for (int i = 0;
         i < 2000 && __atomic_load_n(&second.head()->nscd_certainly_running, __ATOMIC_ACQUIRE) == 0;
         ++i) {
        usleep(1000);
    }
    EXPECT_EQ(second.head()->nscd_certainly_running, 1);
    w.shutdown();
    EXPECT_EQ(second.head()->nscd_certainly_running, 0);
    EXPECT_EQ(second.head()->timestamp, 0u);
}

TEST(MapWriter, WithoutTheGuardTheHeartbeatKeepsTheMapFresh) {
    MapWriter w(MapOptions{.module = 7, .data_size = 4096, .certainly_running = false});
    ASSERT_FALSE(w.open(1000));
    Reader r(*w.current());
    EXPECT_EQ(r.head()->nscd_certainly_running, 0);
    w.heartbeat(2000);
    // Fresh for a few seconds after the last beat, then stale.
    EXPECT_GE(r.head()->timestamp + kMappingTimeout, 2000u);
    EXPECT_LT(r.head()->timestamp + kMappingTimeout, 2010u);
}

TEST(MapWriter, ReadersCannotWriteTheMap) {
    MapWriter w;
    ASSERT_FALSE(w.open(1000));
    void* p = mmap(nullptr, w.current()->map_size(), PROT_READ | PROT_WRITE, MAP_SHARED,
                   w.current()->reader_fd(), 0);
    EXPECT_EQ(p, MAP_FAILED);
}

TEST(MapWriter, ShutdownMakesClientsDropTheMap) {
    MapWriter w;
    ASSERT_FALSE(w.open(1000));
    w.set_netlink_stamp(77);
    Reader r(*w.current());
    EXPECT_EQ(r.head()->extra_data[0], 77u);
    w.shutdown();
    EXPECT_EQ(r.head()->timestamp, 0u);
}

// Audit item 3: a client asking the socket again and again for one cached name made every
// answer a new record (map space, an expiry-queue entry) until the TTL ran out.
TEST(MapWriter, RepublishingAnUnchangedRecordCostsNothing) {
    MapWriter w(MapOptions{.module = 7, .data_size = 64 * 1024});
    ASSERT_FALSE(w.open(1000));
    Reader r(*w.current());
    ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes("A"), 86400, 10'000, 1000));
    const int32_t used = r.head()->first_free;
    for (int i = 1; i <= 10'000; ++i) {
        // A cache hit: the same answer, its TTL counted down.
        ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes("A"), 86400 - i / 1000, 10'000 + i, 1000));
    }
    EXPECT_EQ(r.head()->first_free, used);
    EXPECT_EQ(w.pending_expiries(), 1u);
    EXPECT_EQ(w.rotations(), 0u);
    EXPECT_EQ(r.find(GETAI, "a"), "A");
    // A fresher TTL (a refresh) moves the expiry in place; a changed answer replaces the record.
    ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes("A"), 86400, 50'000, 1040));
    EXPECT_EQ(w.expiry_of(GETAI, bytes("a")), 50'000u + 86'400'000u);
    EXPECT_EQ(r.head()->first_free, used);
    ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes("B"), 60, 50'000, 1040));
    EXPECT_EQ(r.find(GETAI, "a"), "B");
    EXPECT_EQ(w.pending_expiries(), 1u);
    EXPECT_EQ(w.expire(50'000 + 60'000), 0u);
    EXPECT_EQ(r.find(GETAI, "a"), "");
    EXPECT_EQ(w.pending_expiries(), 0u);
}

// Replaced records leave no expiry-queue entries behind.
TEST(MapWriter, ReplacedRecordsLeaveNothingQueued) {
    MapWriter w(MapOptions{.module = 7, .data_size = 1u << 20});
    ASSERT_FALSE(w.open(1000));
    for (int i = 0; i < 1000; ++i) {
        const std::string answer = "answer-" + std::to_string(i);
        ASSERT_TRUE(w.publish(GETAI, bytes("a"), bytes(answer), 86400, 10'000 + i, 1000));
    }
    EXPECT_EQ(w.entries(), 1u);
    EXPECT_EQ(w.pending_expiries(), 1u);
}

// Audit item 8: every rotation made a map of the configured size (32 MiB), which a client that
// keeps the old descriptor pins; a new map is now sized to what it holds.
TEST(MapWriter, AMapIsSizedToWhatItHolds) {
    MapWriter w(MapOptions{.module = 7, .data_size = 32u << 20});
    ASSERT_FALSE(w.open(1000));
    EXPECT_LE(w.current()->data_size(), 1u << 20);
    uint64_t now_ms = 0;
    for (int i = 0; i < 100'000 && w.rotations() < 3; ++i) {
        now_ms += 10'000;  // no rotation is held back in this test
        const std::string k = "name-" + std::to_string(i);
        ASSERT_TRUE(w.publish(GETAI, bytes(k), bytes(std::string(200, 'a')), 86400, now_ms, 1000));
    }
    ASSERT_EQ(w.rotations(), 3u);  // it grew as it filled, keeping every record
    const uint32_t size = w.current()->data_size();
    EXPECT_LT(size, 32u << 20);
    EXPECT_GE(size, w.entries() * 200);
    Reader r(*w.current());
    EXPECT_EQ(r.find(GETAI, "name-0"), std::string(200, 'a'));
    w.flush(1001);
    EXPECT_LE(w.current()->data_size(), 1u << 20);
}

// Replacing a record again and again (a client's answers that keep changing) fills the map;
// it is rotated at most once per min_rotation_interval_ms, its records served meanwhile.
TEST(MapWriter, ChurnRotatesTheMapAtMostOncePerInterval) {
    MapWriter w(MapOptions{.module = 7, .data_size = 64 * 1024});
    ASSERT_FALSE(w.open(1000));
    ASSERT_TRUE(w.publish(GETAI, bytes("keep"), bytes("K"), 600, 0, 1000));
    for (int i = 0; i < 10'000; ++i) {
        w.publish(GETAI, bytes("churn"), bytes(std::string(100, 'a' + i % 2)), 600, 5000, 1000);
    }
    EXPECT_LE(w.rotations(), 1u);
    EXPECT_GT(w.deferred_rotations(), 0u);
    Reader r(*w.current());
    EXPECT_EQ(r.find(GETAI, "keep"), "K");
    EXPECT_NE(r.find(GETAI, "churn"), "");
    const uint64_t before = w.rotations();
    for (int i = 0; i < 10'000 && w.rotations() == before; ++i) {
        w.publish(GETAI, bytes("churn"), bytes(std::string(100, 'a' + i % 2)), 600, 60'000, 1000);
    }
    EXPECT_EQ(w.rotations(), before + 1);  // once the interval has passed
}

// Review of audit item 3: what the host front's thread keeps per nscd record (a prefetch timer) was
// let go only near the record's TTL, not when the record left the map. The drop listener hears
// every record that leaves (expired, removed, dropped by a rotation, flushed), and none that a
// newer record of its key replaced: what it has not heard of is exactly what the map holds.
TEST(MapWriter, TheDropListenerHearsEveryRecordThatLeaves) {
    MapWriter w(MapOptions{.module = 7, .data_size = 64 * 1024});
    ASSERT_FALSE(w.open(1000));
    std::set<std::string> held;
    size_t unknown = 0;
    w.set_drop_listener([&](const std::string& k) { unknown += held.erase(k) == 0; });
    auto publish = [&](const std::string& name, const std::string& answer, uint32_t ttl,
                       uint64_t now_ms) {
        if (w.publish(GETAI, bytes(name), bytes(answer), ttl, now_ms, 1000)) {
            held.insert(MapWriter::index_key(GETAI, bytes(name)));
        }
    };
    uint64_t now_ms = 0;
    for (int i = 0; i < 3000; ++i) {  // far more than 64K holds: rotations drop records
        now_ms += 1000;
        publish("name-" + std::to_string(i), std::string(60, 'a' + i % 2), 86400, now_ms);
        publish("name-" + std::to_string(i / 2), std::string(60, 'c'), 86400, now_ms);  // replaced
    }
    EXPECT_GT(w.rotations(), 0u);
    EXPECT_EQ(held.size(), w.entries());
    publish("short", "S", 1, now_ms);
    w.remove(GETAI, bytes("name-2999"));
    w.expire(now_ms + 2000);
    EXPECT_EQ(held.size(), w.entries());
    EXPECT_EQ(held.count(MapWriter::index_key(GETAI, bytes("short"))), 0u);
    w.flush(1001);
    EXPECT_EQ(w.entries(), 0u);
    EXPECT_TRUE(held.empty());
    EXPECT_EQ(unknown, 0u);
}

// bench/RESULTS.md "User databases": every map had 32749 buckets (a 128 KiB array), so a
// lookup among 318 services missed the level-1 cache where nscd's 211 buckets do not. A map
// told what its database holds gets the smallest prime at or above it, 211 to 32749.
TEST(MapWriter, TheBucketCountFollowsTheExpectedEntries) {
    EXPECT_EQ(bucket_count_for(0, 32749), 211u);
    EXPECT_EQ(bucket_count_for(636, 32749), 641u);       // 318 services, two keys each
    EXPECT_EQ(bucket_count_for(20'000, 32749), 20011u);  // 10,000 users by name and uid
    EXPECT_EQ(bucket_count_for(40'000, 32749), 32749u);
    EXPECT_EQ(bucket_count_for(636, 7), 7u);  // never above the configured count

    MapWriter hosts;  // not told: the configured count, as the hosts map keeps
    ASSERT_FALSE(hosts.open(1000));
    EXPECT_EQ(hosts.buckets(), 32749u);

    MapWriter w(MapOptions{.data_size = 4u << 20, .min_rotation_interval_ms = 0});
    w.set_expected_entries(636);
    ASSERT_FALSE(w.open(1000));
    EXPECT_EQ(w.buckets(), 641u);
    for (int i = 0; i < 636; ++i) {
        const std::string k = "svc-" + std::to_string(i) + "/tcp";
        ASSERT_TRUE(w.publish(GETSERVBYNAME, bytes(k), bytes("S" + k), 600, 1000, 1000));
    }
    {
        Reader r(*w.current());  // glibc's bucket choice: key_hash % the head's module
        EXPECT_EQ(r.head()->module, 641);
        for (int i = 0; i < 636; ++i) {
            const std::string k = "svc-" + std::to_string(i) + "/tcp";
            EXPECT_EQ(r.find(GETSERVBYNAME, k), "S" + k);
        }
    }
    // A flush sizes the new map to what the files say now.
    w.set_expected_entries(20'000);
    w.flush(1001);
    EXPECT_EQ(w.buckets(), 20011u);
    // Records beyond the files (module answers) outgrow two a bucket: a larger array.
    w.set_expected_entries(0);
    w.flush(1002);
    EXPECT_EQ(w.buckets(), 211u);
    for (int i = 0; i < 2000; ++i) {
        const std::string k = "user-" + std::to_string(i);
        ASSERT_TRUE(w.publish(GETPWBYNAME, bytes(k), bytes("P" + k), 600, 2000 + i, 1002));
    }
    EXPECT_GE(w.buckets(), 1000u);
    EXPECT_EQ(w.entries(), 2000u);
    Reader r(*w.current());
    for (int i = 0; i < 2000; ++i) {
        const std::string k = "user-" + std::to_string(i);
        EXPECT_EQ(r.find(GETPWBYNAME, k), "P" + k);
    }
}

// Review of issue 18, item 8: not-found records for names anyone can invent filled the user
// databases' maps. At max_negative live at once, a not-found is refused; the count follows
// every way a record leaves (expiry, removal, replacement, rotation, flush).
TEST(MapWriter, NotFoundRecordsAreBoundedAndCountedExactly) {
    MapWriter w(MapOptions{.module = 7,
                           .data_size = 64 * 1024,
                           .certainly_running = false,
                           .min_rotation_interval_ms = 0,
                           .max_negative = 3});
    ASSERT_FALSE(w.open(1000));
    const std::string found("\x02\0\0\0\x01\0\0\0found", 13);
    const std::string missing("\x02\0\0\0\0\0\0\0", 8);
    auto publish = [&](const std::string& k, const std::string& reply, uint32_t ttl = 600,
                       uint64_t now_ms = 0) {
        return w.publish(GETPWBYNAME, bytes(k), bytes(reply), ttl, now_ms, 1000);
    };
    EXPECT_TRUE(publish("a", missing, 1));
    EXPECT_TRUE(publish("b", missing));
    EXPECT_TRUE(publish("c", missing));
    EXPECT_FALSE(publish("d", missing));  // at the bound
    EXPECT_TRUE(publish("c", missing));   // the same again: no new record
    EXPECT_TRUE(publish("e", found));     // found records are never bounded
    EXPECT_EQ(w.negatives(), 3u);
    EXPECT_EQ(w.refused_negatives(), 1u);
    Reader r(*w.current());
    EXPECT_EQ(r.find(GETPWBYNAME, "d"), "");
    // A found record the bound keeps from turning not-found is retired, not left standing.
    EXPECT_FALSE(publish("e", missing));
    EXPECT_EQ(r.find(GETPWBYNAME, "e"), "");
    w.expire(1000);  // "a" leaves
    EXPECT_EQ(w.negatives(), 2u);
    EXPECT_TRUE(publish("d", missing));
    EXPECT_TRUE(publish("b", found));  // replaced by a found one
    EXPECT_EQ(w.negatives(), 2u);
    w.remove(GETPWBYNAME, bytes("c"));
    EXPECT_EQ(w.negatives(), 1u);
    // A rotation keeps the live records (a churned key filled the map) and their count...
    for (int i = 0; i < 2000 && w.rotations() == 0; ++i) {
        publish("churn", found + std::string(100, char('a' + i % 2)));
    }
    EXPECT_EQ(w.rotations(), 1u);
    EXPECT_NE(w.expiry_of(GETPWBYNAME, bytes("d")), 0u);
    EXPECT_EQ(w.negatives(), 1u);
    // ...and one that starts from nothing (live records fill even a new map) drops it.
    for (int i = 0; i < 2000; ++i) publish("x" + std::to_string(i), found + std::string(40, 'f'));
    EXPECT_EQ(w.expiry_of(GETPWBYNAME, bytes("d")), 0u);
    EXPECT_EQ(w.negatives(), 0u);
    EXPECT_TRUE(publish("d", missing));
    EXPECT_EQ(w.negatives(), 1u);
    w.flush(1001);
    EXPECT_EQ(w.negatives(), 0u);
    EXPECT_TRUE(publish("f", missing));
    EXPECT_EQ(w.negatives(), 1u);
}

// A guard that acks only when the test says, and adds up how long it was asked to wait.
struct FakeGuard final : FlagGuard {
    uint64_t generation = 0;
    uint64_t acked_generation = 0;
    int32_t* flag = nullptr;
    int waited_ms = 0;
    uint64_t guard(int32_t* f) override {
        flag = f;
        return ++generation;
    }
    uint64_t acked() const override { return acked_generation; }
    bool wait_acked(uint64_t g, int timeout_ms) override {
        if (acked_generation < g) waited_ms += timeout_ms;  // what a real guard could spin
        return acked_generation >= g;
    }
    void ack() {
        if (flag != nullptr) *flag = 1;
        acked_generation = generation;
    }
};

// Audit item 9: a rotation waited (up to 100 ms) on the thread that answers every nscd client
// for the guard threads to point at the new map.
TEST(MapWriter, ARotationNeverWaitsForTheGuard) {
    FakeGuard guard;
    MapWriter w(MapOptions{.module = 7, .data_size = 4096, .guard = &guard});
    ASSERT_FALSE(w.open(1000));
    guard.ack();
    w.heartbeat(1000);
    guard.waited_ms = 0;
    const MapFile* first = w.current();
    Reader old_reader(*first);
    w.flush(1001);  // as INVALIDATE does, on the front's thread
    for (int i = 0; i < 200 && w.rotations() < 2; ++i) {  // and as a full map does
        const std::string answer(100, 'a' + i % 2);
        w.publish(GETAI, bytes("churn"), bytes(answer), 600, uint64_t(i) * 10'000, 1001);
    }
    ASSERT_EQ(w.rotations(), 2u);
    EXPECT_EQ(guard.waited_ms, 0);
    // Until the guard points at the new map, its timestamp keeps it fresh for a few seconds
    // (clients check it while the flag is 0), and the old map stays mapped here.
    Reader r(*w.current());
    EXPECT_EQ(r.head()->nscd_certainly_running, 0);
    EXPECT_GE(r.head()->timestamp + kMappingTimeout, 1001u);
    EXPECT_EQ(old_reader.head()->timestamp, 0u);
    EXPECT_FALSE(w.settle());  // the front's thread looks again soon, on a timer
    guard.ack();
    EXPECT_TRUE(w.settle());
    EXPECT_EQ(r.head()->nscd_certainly_running, 1);
    EXPECT_LT(r.head()->timestamp + kMappingTimeout, 1000u);
}

}  // namespace
}  // namespace nscache::nscd
