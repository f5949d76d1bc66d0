// SPDX-License-Identifier: BSD-3-Clause
// The answer cache: entries keyed by (lower-cased qname, qtype, qclass, DO, CD), stored ready
// to send, within a byte budget.
//
// Guarantees
// - Thread-safe. The cache is split into shards, each behind its own mutex, chosen by the
//   name's seeded hash; a lookup takes one shard lock for one bucket walk and one copy.
// - Bounded work per call: no call walks the whole cache or a whole shard while holding a lock.
//   Expired entries are misses (or stale hits) at lookup and are reclaimed a few at a time by
//   inserts; eviction is CLOCK (second chance, scan resistant) with a bounded sweep.
// - Memory: every entry's allocation, its ring slot and the bucket arrays are counted against
//   the budget; inserts evict to stay within it and never fail for lack of room.
// - flush() swaps each shard's contents out under its lock and frees them after unlocking;
//   flush_name() touches one bucket of one shard.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "cache/answer.h"
#include "cache/render.h"
#include "common/hash.h"
#include "dns/query.h"
#include "dns/wire.h"

namespace nscache::cache {

inline constexpr uint8_t kKeyDo = 1;
inline constexpr uint8_t kKeyCd = 2;

struct CacheKey {
    dns::Bytes name;  // uncompressed wire name, lower-cased
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    uint8_t flags = 0;  // kKeyDo | kKeyCd
    // hash_name(name) when the caller has it (upstream::Question computes it once per client
    // query); 0: the cache computes it. Trusted: it picks the shard and the bucket (checked
    // builds, NSCACHE_CHECKS, abort on one that is not hash_name(name)).
    uint64_t name_hash = 0;
};

struct CacheConfig {
    size_t budget_bytes = size_t{64} << 20;
    uint32_t stale_ttl_s = 0;  // keep expired entries this long for serve-stale; 0 = drop at expiry
    size_t shards = 0;         // 0: chosen from the budget
    uint64_t seed = 0;         // hash seed; 0: a random one
};

enum class Freshness : uint8_t { Miss, Fresh, Stale };

struct LookupResult {
    Freshness freshness = Freshness::Miss;
    size_t length = 0;       // bytes rendered into `out` (Fresh or Stale)
    bool truncated = false;  // rendered as TC=1 because it did not fit
    bool prefetch = false;   // a popular entry in the last 10% of its TTL: refresh it now
};

// An entry copied out of the cache for a reader of its records (the host lookup) rather than
// an answer rendered for a DNS client: what that reader needs, copied once, into a buffer it
// owns and passes again (it grows to the largest entry read, then takes no allocation).
struct CachedAnswer {
    Freshness freshness = Freshness::Miss;
    bool prefetch = false;  // as LookupResult::prefetch (and taken by this lookup the same way)
    uint32_t age_s = 0;     // seconds since it was stored: what render_answer counts TTLs down by
    uint8_t rcode = 0;
    uint16_t ancount = 0;
    uint16_t nscount = 0;
    // Fresh or Stale: the entry's records (TTLs as stored) from records_offset, behind a
    // stand-in for the header and question they came after (12 zero bytes, the key's name,
    // 4 zero bytes), where their compression pointers point.
    std::vector<uint8_t> message;
    size_t records_offset = 0;

    dns::Bytes qname() const {
        return dns::Bytes(message.data() + dns::kHeaderSize, records_offset - dns::kHeaderSize - 4);
    }
};

struct CacheCounters {
    uint64_t entries = 0;
    uint64_t bytes = 0;
    uint64_t budget = 0;
    uint64_t evictions = 0;
    uint64_t expirations = 0;
    uint64_t inserts = 0;
};

// A copy of one entry, for dump.
struct EntrySnapshot {
    std::vector<uint8_t> name;
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    uint8_t key_flags = 0;
    uint64_t born_ms = 0;
    PreparedAnswer answer;  // ttl = the fresh lifetime from born_ms
};

class CacheShard;
class NameSet;

class Cache {
  public:
    explicit Cache(const CacheConfig& config);
    ~Cache();
    Cache(const Cache&) = delete;
    Cache& operator=(const Cache&) = delete;

    // Looks `key` up and, on a hit, renders the answer for `query` into `out` (which must hold
    // limits.max_size bytes). Stale entries are rendered only with `allow_stale`; otherwise
    // they report Freshness::Stale with length 0.
    LookupResult lookup(const CacheKey& key, const dns::Query& query, uint64_t now_ms,
                        const RenderLimits& limits, std::span<uint8_t> out, bool allow_stale);

    // As lookup(), but copies the entry (fresh or stale alike) into `out` instead of rendering
    // it: one copy under the shard's lock, nothing called out under it, no allocation once
    // out.message has grown. The caller counts the TTLs down by age_s, or uses
    // kStaleAnswerTtl for a stale entry, as render_answer does.
    void lookup_answer(const CacheKey& key, uint64_t now_ms, CachedAnswer& out);

    // RFC 8020: a fresh cached NXDOMAIN for an ancestor of key.name (at label offsets up to
    // `top_offset` into it: where its forwarding rule's domain begins, so that no NXDOMAIN
    // from another route's servers speaks for it), rendered for `query`: Fresh, or Miss.
    // At most one bucket walk per label (127). None for DO: the marker holds no NSEC proofs.
    LookupResult lookup_below_nxdomain(const CacheKey& key, size_t top_offset,
                                       const dns::Query& query, uint64_t now_ms,
                                       const RenderLimits& limits, std::span<uint8_t> out);

    // Stores `answer` under `key` (replacing any entry) if answer.ttl > 0; a plain NXDOMAIN
    // also under its NXDOMAIN-cut marker (cache/nxdomain_cut.h).
    void insert(const CacheKey& key, const PreparedAnswer& answer, uint64_t now_ms);

    // Stores an entry read back from a dump; `born_ms` may lie in the past.
    void insert_at(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                   uint64_t now_ms);
    // As insert_at, for a cache file's entries as it loads: without the few steps of expiry
    // sweep each insert takes, since the loader leaves out what has expired. On a ring that
    // grows by one entry per insert the sweep laps it over and over, a cache miss a step:
    // 30% of a million-entry load (perf).
    void insert_loaded(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                       uint64_t now_ms);
    // Brings the bucket that an insert of a name with this hash_name() will touch into the
    // CPU cache, so that a loader checking the next entries meanwhile does not wait for it
    // (the bucket arrays are tens of MiB: each insert of a load missed on one; perf).
    void prefetch_bucket(uint64_t name_hash) const;

    // A new byte budget (a reload): a smaller one is reached a few evictions per insert. The
    // shards and their bucket arrays keep the size the budget at start gave them; returns
    // false when the new budget is far from it (under half, or over four times): the cache
    // works, but only a restart sizes it for the new budget.
    bool set_budget(size_t budget_bytes);

    // Removes everything; returns how many entries went.
    size_t flush();
    // Removes every entry whose qname is `lower_name`, whatever its type, class or flags.
    size_t flush_name(dns::Bytes lower_name);
    // Removes every entry at or under `lower_suffix` (a wire name): a walk of the whole cache,
    // one slice of one shard per lock hold. Never from a thread that answers queries.
    size_t flush_suffix(dns::Bytes lower_suffix);
    // Removes every entry whose qname `names` covers: one walk of the whole cache however many
    // names and subtrees it holds, one slice of one shard per lock hold, none at all when the
    // cache is empty. Never from a thread that answers queries.
    size_t flush_matching(const NameSet& names);

    CacheCounters counters() const;

    // For dump: copies the live entries of one slice of one shard's buckets, under that
    // shard's lock for that slice only. Slices are numbered 0..slices_per_shard()-1.
    size_t shard_count() const { return shards_.size(); }
    size_t slices_per_shard() const;
    void snapshot_slice(size_t shard, size_t slice, uint64_t now_ms,
                        std::vector<EntrySnapshot>& out) const;
    // As snapshot_slice, but the slice's entries overwrite out[0..n) and n is returned:
    // elements past n are kept, not destroyed, so their vectors' capacity serves the next
    // slice and a dump stops allocating after its first slices (malloc and free were 40% of
    // dumping a million entries; perf).
    size_t snapshot_slice_reusing(size_t shard, size_t slice, uint64_t now_ms,
                                  std::vector<EntrySnapshot>& out) const;

    // Inline: the hit path hashes each client query's name once, here.
    uint64_t hash_name(dns::Bytes lower_name) const {
        return seeded_hash(seed_, lower_name.data(), lower_name.size());
    }

  private:
    void insert_with(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                     uint64_t now_ms, int reclaim_steps);
    CacheShard& shard_for(uint64_t hash) const;
    // The key's name hash: the caller's, or computed now.
    uint64_t hash_of(const CacheKey& key) const;

    std::vector<std::unique_ptr<CacheShard>> shards_;
    uint64_t seed_;
    std::atomic<size_t> budget_;
    const size_t initial_budget_;
    unsigned shard_shift_;
};

}  // namespace nscache::cache
