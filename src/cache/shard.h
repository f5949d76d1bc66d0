// SPDX-License-Identifier: BSD-3-Clause
// One shard of the cache: a fixed-size chained hash table and a CLOCK ring over its entries,
// behind one mutex (held for one bucket walk, one copy or a bounded sweep; nothing is called
// out under it). Internal to cache/; Cache picks the shard from the name's hash.
//
// Buckets are chosen by the name's hash alone (not the type), so all entries of one name share
// a chain and flush_name is one chain walk. Chains are capped, so a client asking one name
// for thousands of types cannot build a long chain: a full chain's oldest entry makes room
// for a new one, so a new answer always gets in.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "cache/cache.h"
#include "cache/entry.h"
#include "common/mutex.h"

namespace nscache::cache {

class CacheShard {
  public:
    CacheShard(size_t budget_bytes, uint32_t stale_ttl_s);
    ~CacheShard();

    LookupResult lookup(const CacheKey& key, uint64_t hash, const dns::Query& query,
                        uint64_t now_ms, const RenderLimits& limits, std::span<uint8_t> out,
                        bool allow_stale);
    // `out` comes with freshness Miss and prefetch false.
    void lookup_answer(const CacheKey& key, uint64_t hash, uint64_t now_ms, CachedAnswer& out);
    // Expired entries examined per insert: small, constant, and enough to keep up with inserts.
    static constexpr int kReclaimSteps = 4;

    // `reclaim_steps`: expired entries examined on the way (kReclaimSteps; 0 for a cache
    // file's entries, see Cache::insert_loaded).
    void insert(const CacheKey& key, uint64_t hash, const PreparedAnswer& answer, uint64_t born_ms,
                uint64_t now_ms, int reclaim_steps);
    void prefetch_bucket(uint64_t hash);
    size_t flush();
    size_t flush_name(dns::Bytes lower_name, uint64_t hash);
    // Removes the entries of one slice of buckets whose name is at or under `lower_suffix`.
    size_t flush_suffix_slice(size_t slice, dns::Bytes lower_suffix);
    // Removes the entries of one slice of buckets whose name `names` covers.
    size_t flush_matching_slice(size_t slice, const NameSet& names);
    // A new byte budget. A smaller one is reached gradually: each insert evicts a bounded
    // number of entries, never the whole excess at once.
    void set_budget(size_t budget_bytes);

    size_t slice_count() const;
    // Writes the slice's live entries to out[first..], reusing the elements there (growing
    // `out` when it runs short, never shrinking it); returns the index after the last written.
    size_t snapshot_slice(size_t slice, uint64_t now_ms, std::vector<EntrySnapshot>& out,
                          size_t first);

    void add_counters(CacheCounters& c) const;

  private:
    struct State {
        std::vector<Entry*> buckets;
        std::vector<Entry*> ring;   // CLOCK order; no holes (removal moves the last entry in)
        size_t hand = 0;            // eviction sweep position
        size_t reclaim_cursor = 0;  // expiry sweep position
        size_t bytes = 0;           // accounted bytes of the entries
    };

    bool is_dead(const Entry* e, uint64_t now_ms) const;
    // Unlinks `e` from its chain and the ring and frees it.
    void remove(Entry* e) NSCACHE_REQUIRES(mu_);
    // Removes the entries of one slice of buckets whose name `matches`; takes the lock.
    size_t flush_slice_where(size_t slice, const std::function<bool(dns::Bytes)>& matches);
    // The entry a read finds for `key` and how fresh it is, by the rules every read follows
    // (lookup, lookup_answer): a fresh one is marked visited and, near its end, taken for
    // prefetch once (`prefetch`); a dead one is removed and read as a miss (null).
    Entry* find_for_read(const CacheKey& key, uint32_t hash32, uint64_t now_ms,
                         Freshness& freshness, bool& prefetch) NSCACHE_REQUIRES(mu_);
    void evict_one(uint64_t now_ms) NSCACHE_REQUIRES(mu_);
    void reclaim_expired(uint64_t now_ms, int steps) NSCACHE_REQUIRES(mu_);

    const uint64_t stale_ms_;
    const size_t bucket_count_;
    // The budget minus the bucket array; a reload may change it (set_budget).
    std::atomic<size_t> entry_budget_;
    Mutex mu_;
    State state_ NSCACHE_GUARDED_BY(mu_);

    // Written under the lock, read by stats without it.
    std::atomic<uint64_t> entries_{0};
    std::atomic<uint64_t> bytes_{0};
    std::atomic<uint64_t> evictions_{0};
    std::atomic<uint64_t> expirations_{0};
    std::atomic<uint64_t> inserts_{0};
};

}  // namespace nscache::cache
