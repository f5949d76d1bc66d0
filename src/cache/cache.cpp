// SPDX-License-Identifier: BSD-3-Clause
#include "cache/cache.h"

#include <algorithm>
#include <bit>
#include <cstdio>
#include <cstdlib>

#include "cache/name_set.h"
#include "cache/nxdomain_cut.h"
#include "cache/shard.h"
#include "common/hash.h"
#include "common/random.h"
#include "dns/name.h"

namespace nscache::cache {
namespace {

// Shards of about this size: enough of them that worker threads rarely meet on one lock,
// few enough that each holds many entries and evicts fairly.
constexpr size_t kTargetShardBytes = size_t{256} << 10;
constexpr size_t kMaxShards = 256;

size_t shard_count_for(const CacheConfig& config) {
    if (config.shards != 0) return std::bit_floor(std::min(config.shards, kMaxShards));
    const size_t wanted = config.budget_bytes / kTargetShardBytes;
    return std::bit_floor(std::clamp<size_t>(wanted, 1, kMaxShards));
}

}  // namespace

Cache::Cache(const CacheConfig& config)
    : seed_(config.seed != 0 ? config.seed : secure_random_u64()),
      budget_(config.budget_bytes),
      initial_budget_(config.budget_bytes) {
    const size_t count = shard_count_for(config);
    shard_shift_ = static_cast<unsigned>(std::countr_zero(count));
    shards_.reserve(count);
    for (size_t i = 0; i < count; ++i) {
        shards_.push_back(
            std::make_unique<CacheShard>(config.budget_bytes / count, config.stale_ttl_s));
    }
}

Cache::~Cache() = default;

#ifdef NSCACHE_CHECKS
[[noreturn, gnu::cold]] static void wrong_name_hash(const CacheKey& key) {
    std::fprintf(stderr, "cache: CacheKey::name_hash is not the cache's hash of %s\n",
                 dns::name_to_text(key.name).c_str());
    std::abort();
}
#endif

inline uint64_t Cache::hash_of(const CacheKey& key) const {
    if (key.name_hash == 0) return hash_name(key.name);
#ifdef NSCACHE_CHECKS
    if (key.name_hash != hash_name(key.name)) wrong_name_hash(key);
#endif
    return key.name_hash;
}

// Shards take the hash's low bits; buckets within a shard take its high 32 bits.
CacheShard& Cache::shard_for(uint64_t hash) const {
    return *shards_[hash & ((size_t{1} << shard_shift_) - 1)];
}

LookupResult Cache::lookup(const CacheKey& key, const dns::Query& query, uint64_t now_ms,
                           const RenderLimits& limits, std::span<uint8_t> out, bool allow_stale) {
    if (key.qtype == kNxdomainMarkerType) return {};  // the marker answers only names below
    const uint64_t hash = hash_of(key);
    return shard_for(hash).lookup(key, hash, query, now_ms, limits, out, allow_stale);
}

void Cache::lookup_answer(const CacheKey& key, uint64_t now_ms, CachedAnswer& out) {
    out.freshness = Freshness::Miss;
    out.prefetch = false;
    if (key.qtype == kNxdomainMarkerType) return;
    const uint64_t hash = hash_of(key);
    shard_for(hash).lookup_answer(key, hash, now_ms, out);
}

void Cache::insert(const CacheKey& key, const PreparedAnswer& answer, uint64_t now_ms) {
    insert_at(key, answer, now_ms, now_ms);
}

void Cache::insert_at(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                      uint64_t now_ms) {
    insert_with(key, answer, born_ms, now_ms, CacheShard::kReclaimSteps);
}

void Cache::insert_loaded(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                          uint64_t now_ms) {
    insert_with(key, answer, born_ms, now_ms, 0);
}

void Cache::prefetch_bucket(uint64_t name_hash) const {
    shard_for(name_hash).prefetch_bucket(name_hash);
}

void Cache::insert_with(const CacheKey& key, const PreparedAnswer& answer, uint64_t born_ms,
                        uint64_t now_ms, int reclaim_steps) {
    if (answer.ttl == 0 || key.name.empty() || key.name.size() > dns::kMaxNameLength) return;
    // The marker's key is the cache's own: no answer, whether to a client's question, from a
    // cache file or from the shared tier, is stored there (one would speak for every name
    // below, compression pointers into another question included). Markers are made only
    // here, from their NXDOMAIN; a dumped one is made again when its NXDOMAIN is loaded.
    if (key.qtype == kNxdomainMarkerType) return;
    const uint64_t hash = hash_of(key);
    shard_for(hash).insert(key, hash, answer, born_ms, now_ms, reclaim_steps);
    if ((key.flags & kKeyDo) != 0) return;
    if (auto marker = nxdomain_marker(key.name, answer)) {
        shard_for(hash).insert(CacheKey{key.name, kNxdomainMarkerType, key.qclass, key.flags, hash},
                               hash, *marker, born_ms, now_ms, reclaim_steps);
    }
}

LookupResult Cache::lookup_below_nxdomain(const CacheKey& key, size_t top_offset,
                                          const dns::Query& query, uint64_t now_ms,
                                          const RenderLimits& limits, std::span<uint8_t> out) {
    LookupResult none;
    if ((key.flags & kKeyDo) != 0) return none;
    const dns::Bytes name = key.name;
    // Ancestors from the nearest up; the root is never NXDOMAIN.
    size_t offset = 0;
    for (int labels = 0; labels < 127 && offset < name.size() && name[offset] != 0; ++labels) {
        offset += 1 + size_t{name[offset]};
        if (offset > top_offset || offset >= name.size() || name[offset] == 0) break;
        const CacheKey ancestor{name.subspan(offset), kNxdomainMarkerType, key.qclass, key.flags};
        const uint64_t hash = hash_name(ancestor.name);
        LookupResult r = shard_for(hash).lookup(ancestor, hash, query, now_ms, limits, out, false);
        if (r.freshness == Freshness::Fresh) {
            r.prefetch = false;  // the NXDOMAIN's own question refreshes it, not this one
            return r;
        }
    }
    return none;
}

bool Cache::set_budget(size_t budget_bytes) {
    budget_.store(budget_bytes, std::memory_order_relaxed);
    for (auto& shard : shards_) shard->set_budget(budget_bytes / shards_.size());
    return budget_bytes >= initial_budget_ / 2 && budget_bytes <= initial_budget_ * 4;
}

size_t Cache::flush() {
    size_t removed = 0;
    for (auto& shard : shards_) removed += shard->flush();
    return removed;
}

size_t Cache::flush_suffix(dns::Bytes lower_suffix) {
    size_t removed = 0;
    for (auto& shard : shards_) {
        for (size_t slice = 0; slice < shard->slice_count(); ++slice) {
            removed += shard->flush_suffix_slice(slice, lower_suffix);
        }
    }
    return removed;
}

size_t Cache::flush_matching(const NameSet& names) {
    // At start, with no cache file, the cache is empty: walking its buckets (4M of them for
    // a 512 MiB budget) would find nothing.
    if (names.empty() || counters().entries == 0) return 0;
    size_t removed = 0;
    for (auto& shard : shards_) {
        for (size_t slice = 0; slice < shard->slice_count(); ++slice) {
            removed += shard->flush_matching_slice(slice, names);
        }
    }
    return removed;
}

size_t Cache::flush_name(dns::Bytes lower_name) {
    const uint64_t hash = hash_name(lower_name);
    return shard_for(hash).flush_name(lower_name, hash);
}

CacheCounters Cache::counters() const {
    CacheCounters c;
    for (const auto& shard : shards_) shard->add_counters(c);
    c.budget = budget_.load(std::memory_order_relaxed);
    return c;
}

size_t Cache::slices_per_shard() const {
    return shards_.front()->slice_count();
}

void Cache::snapshot_slice(size_t shard, size_t slice, uint64_t now_ms,
                           std::vector<EntrySnapshot>& out) const {
    out.resize(shards_[shard]->snapshot_slice(slice, now_ms, out, out.size()));
}

size_t Cache::snapshot_slice_reusing(size_t shard, size_t slice, uint64_t now_ms,
                                     std::vector<EntrySnapshot>& out) const {
    return shards_[shard]->snapshot_slice(slice, now_ms, out, 0);
}

}  // namespace nscache::cache
