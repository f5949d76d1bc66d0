// SPDX-License-Identifier: BSD-3-Clause
#include "cache/shard.h"

#include "cache/name_set.h"

#include "common/bytes.h"
#include "dns/name.h"

#include <malloc.h>

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <new>

namespace nscache::cache {
namespace {

// A chain this long gives up its oldest entry to a new one (see shard.h).
constexpr size_t kMaxChain = 32;
// CLOCK gives a visited entry a second chance, but a sweep stops after this many entries and
// evicts where it stands, so an insert never walks an unbounded stretch of the ring.
constexpr int kMaxSweep = 64;
// Evictions per insert at most: after a budget cut the excess goes a few entries at a time,
// so no insert pays for the whole shrink.
constexpr int kMaxEvictionsPerInsert = 8;
// One bucket per this many budget bytes: about one entry per bucket for small answers.
constexpr size_t kBudgetBytesPerBucket = 128;
// glibc's per-chunk header, which malloc_usable_size does not include.
constexpr size_t kMallocHeader = 8;
constexpr size_t kSliceBuckets = 1024;

size_t accounted_size(const Entry* e) {
    return malloc_usable_size(const_cast<Entry*>(e)) + kMallocHeader + sizeof(Entry*);
}

size_t bucket_count_for(size_t budget) {
    return std::bit_ceil(std::max<size_t>(8, budget / kBudgetBytesPerBucket));
}

bool key_matches(const Entry* e, uint32_t hash32, const CacheKey& key) {
    return e->hash32 == hash32 && e->qtype == key.qtype && e->qclass == key.qclass &&
           e->key_flags == key.flags && e->name_len == key.name.size() &&
           std::memcmp(e->name(), key.name.data(), key.name.size()) == 0;
}

Entry* make_entry(const CacheKey& key, uint32_t hash32, const PreparedAnswer& a, uint64_t born_ms) {
    const size_t ede_len = a.ede.size() <= kMaxEdeBytes ? a.ede.size() : 0;
    const size_t size =
        Entry::allocation_size(key.name.size(), a.ttl_offsets.size(), a.records.size(), ede_len);
    void* memory = std::malloc(size);
    if (memory == nullptr) return nullptr;
    auto* e = static_cast<Entry*>(memory);
    e->next = nullptr;
    e->born_ms = born_ms;
    e->ttl_s = a.ttl;
    e->hash32 = hash32;
    e->ring_slot = 0;
    e->qtype = key.qtype;
    e->qclass = key.qclass;
    e->ancount = a.ancount;
    e->nscount = a.nscount;
    e->arcount = a.arcount;
    e->records_len = static_cast<uint16_t>(a.records.size());
    e->ttl_count = static_cast<uint16_t>(a.ttl_offsets.size());
    e->name_len = static_cast<uint8_t>(key.name.size());
    e->key_flags = key.flags;
    e->rcode = a.rcode;
    e->kind_ad = static_cast<uint8_t>(static_cast<uint8_t>(a.kind) | (a.ad ? 0x80 : 0));
    e->visited = 0;
    e->prefetch_taken = 0;
    e->ede_len = static_cast<uint8_t>(ede_len);
    auto* offsets = reinterpret_cast<uint16_t*>(e + 1);
    copy_bytes(offsets, a.ttl_offsets.data(), a.ttl_offsets.size() * sizeof(uint16_t));
    std::memcpy(const_cast<uint8_t*>(e->name()), key.name.data(), key.name.size());
    copy_bytes(const_cast<uint8_t*>(e->records()), a.records.data(), a.records.size());
    copy_bytes(const_cast<uint8_t*>(e->ede()), a.ede.data(), ede_len);
    return e;
}

}  // namespace

CacheShard::CacheShard(size_t budget_bytes, uint32_t stale_ttl_s)
    : stale_ms_(uint64_t{stale_ttl_s} * 1000),
      bucket_count_(bucket_count_for(budget_bytes)),
      entry_budget_(budget_bytes > bucket_count_ * sizeof(Entry*)
                        ? budget_bytes - bucket_count_ * sizeof(Entry*)
                        : 0) {
    MutexLock lock(mu_);
    state_.buckets.assign(bucket_count_, nullptr);
    state_.ring.reserve(bucket_count_);
}

CacheShard::~CacheShard() {
    flush();
}

bool CacheShard::is_dead(const Entry* e, uint64_t now_ms) const {
    return now_ms >= e->expires_ms() + stale_ms_;
}

void CacheShard::remove(Entry* e) {
    State& s = state_;
    Entry** link = &s.buckets[e->hash32 & (bucket_count_ - 1)];
    while (*link != e) link = &(*link)->next;
    *link = e->next;

    Entry* last = s.ring.back();
    s.ring[e->ring_slot] = last;
    last->ring_slot = e->ring_slot;
    s.ring.pop_back();
    if (s.hand >= s.ring.size()) s.hand = 0;
    if (s.reclaim_cursor >= s.ring.size()) s.reclaim_cursor = 0;

    const size_t size = accounted_size(e);
    s.bytes -= size;
    entries_.fetch_sub(1, std::memory_order_relaxed);
    bytes_.fetch_sub(size, std::memory_order_relaxed);
    std::free(e);
}

void CacheShard::evict_one(uint64_t now_ms) {
    State& s = state_;
    for (int step = 0; step < kMaxSweep; ++step) {
        if (s.hand >= s.ring.size()) s.hand = 0;
        Entry* e = s.ring[s.hand];
        if (is_dead(e, now_ms)) {
            remove(e);
            expirations_.fetch_add(1, std::memory_order_relaxed);
            return;
        }
        if (e->visited && step + 1 < kMaxSweep) {
            e->visited = 0;
            ++s.hand;
            continue;
        }
        remove(e);
        // The ring's last (newest) entry now sits under the hand: step past it so that it,
        // too, waits a full turn before it can be evicted.
        ++s.hand;
        evictions_.fetch_add(1, std::memory_order_relaxed);
        return;
    }
}

void CacheShard::reclaim_expired(uint64_t now_ms, int steps) {
    State& s = state_;
    for (int i = 0; i < steps && !s.ring.empty(); ++i) {
        if (s.reclaim_cursor >= s.ring.size()) s.reclaim_cursor = 0;
        Entry* e = s.ring[s.reclaim_cursor];
        if (is_dead(e, now_ms)) {
            remove(e);  // another entry moved into this slot: look at it next
            expirations_.fetch_add(1, std::memory_order_relaxed);
        } else {
            ++s.reclaim_cursor;
        }
    }
}

// Inlined: a call here cost the hit path about 30 instructions (callgrind).
[[gnu::always_inline]] inline Entry* CacheShard::find_for_read(const CacheKey& key, uint32_t hash32,
                                                               uint64_t now_ms,
                                                               Freshness& freshness,
                                                               bool& prefetch) {
    Entry* e = state_.buckets[hash32 & (bucket_count_ - 1)];
    while (e != nullptr && !key_matches(e, hash32, key)) e = e->next;
    if (e == nullptr) return nullptr;
    const uint64_t expires = e->expires_ms();
    if (now_ms < expires) {
        freshness = Freshness::Fresh;
        // Prefetch (refresh before expiry) only what was asked for before this hit too.
        const uint64_t remaining = expires - now_ms;
        if (e->visited && !e->prefetch_taken && remaining * 10 < uint64_t{e->ttl_s} * 1000) {
            e->prefetch_taken = 1;
            prefetch = true;
        }
        e->visited = 1;
        return e;
    }
    if (is_dead(e, now_ms)) {
        remove(e);
        expirations_.fetch_add(1, std::memory_order_relaxed);
        return nullptr;
    }
    freshness = Freshness::Stale;
    return e;
}

LookupResult CacheShard::lookup(const CacheKey& key, uint64_t hash, const dns::Query& query,
                                uint64_t now_ms, const RenderLimits& limits, std::span<uint8_t> out,
                                bool allow_stale) {
    LookupResult result;
    MutexLock lock(mu_);
    const Entry* e = find_for_read(key, static_cast<uint32_t>(hash >> 32), now_ms, result.freshness,
                                   result.prefetch);
    if (e == nullptr) return result;
    if (result.freshness == Freshness::Fresh) {
        const auto age_s = static_cast<uint32_t>((now_ms - e->born_ms) / 1000);
        result.length =
            render_answer(e->view(), query, age_s, false, limits, out, &result.truncated);
    } else if (allow_stale) {
        result.length = render_answer(e->view(), query, 0, true, limits, out, &result.truncated);
    }
    return result;
}

void CacheShard::lookup_answer(const CacheKey& key, uint64_t hash, uint64_t now_ms,
                               CachedAnswer& out) {
    MutexLock lock(mu_);
    const Entry* e =
        find_for_read(key, static_cast<uint32_t>(hash >> 32), now_ms, out.freshness, out.prefetch);
    if (e == nullptr) return;
    out.age_s =
        out.freshness == Freshness::Fresh ? static_cast<uint32_t>((now_ms - e->born_ms) / 1000) : 0;
    out.rcode = e->rcode;
    out.ancount = e->ancount;
    out.nscount = e->nscount;
    out.records_offset = dns::kHeaderSize + e->name_len + 4;
    // Allocates only when the buffer is smaller than this entry (at most 64 KiB of records).
    out.message.resize(out.records_offset + e->records_len);
    uint8_t* m = out.message.data();
    std::memset(m, 0, dns::kHeaderSize);
    std::memcpy(m + dns::kHeaderSize, e->name(), e->name_len);
    std::memset(m + dns::kHeaderSize + e->name_len, 0, 4);
    copy_bytes(m + out.records_offset, e->records(), e->records_len);
}

void CacheShard::insert(const CacheKey& key, uint64_t hash, const PreparedAnswer& answer,
                        uint64_t born_ms, uint64_t now_ms, int reclaim_steps) {
    const auto hash32 = static_cast<uint32_t>(hash >> 32);
    Entry* fresh = make_entry(key, hash32, answer, born_ms);
    if (fresh == nullptr) return;
    const size_t cost = accounted_size(fresh);
    // One answer may not take more than a quarter of a shard: it would flush the rest.
    const size_t budget = entry_budget_.load(std::memory_order_relaxed);
    if (cost > budget / 4) {
        std::free(fresh);
        return;
    }

    MutexLock lock(mu_);
    State* s = &state_;
    Entry** head = &s->buckets[hash32 & (bucket_count_ - 1)];
    size_t chain = 0;
    // The victim if the chain is full: its oldest entry not hit since the CLOCK hand passed
    // (entries go in at the head), else its tail. A flood of junk types for one name then
    // evicts its own junk, not the name's popular A record.
    Entry* oldest = nullptr;
    Entry* oldest_unvisited = nullptr;
    for (Entry* e = *head; e != nullptr; oldest = e, e = e->next, ++chain) {
        if (!e->visited) oldest_unvisited = e;
        if (key_matches(e, hash32, key)) {
            // A SERVFAIL says the upstream failed, not that the data changed: it must not
            // replace an answer we hold (fresh, or stale and kept for serve-stale).
            if (answer.kind == AnswerKind::ServFail && e->kind() != AnswerKind::ServFail) {
                std::free(fresh);
                return;
            }
            fresh->visited = e->visited;  // a refreshed entry keeps its popularity
            remove(e);
            chain = 0;
            break;
        }
    }
    if (chain >= kMaxChain) {
        // Refusing the insert instead would let 32 types of one name keep its A record out.
        remove(oldest_unvisited != nullptr ? oldest_unvisited : oldest);
        evictions_.fetch_add(1, std::memory_order_relaxed);
    }
    reclaim_expired(now_ms, reclaim_steps);
    for (int i = 0; i < kMaxEvictionsPerInsert && s->bytes + cost > budget && !s->ring.empty();
         ++i) {
        evict_one(now_ms);
    }

    fresh->next = *head;
    *head = fresh;
    fresh->ring_slot = static_cast<uint32_t>(s->ring.size());
    s->ring.push_back(fresh);
    s->bytes += cost;
    entries_.fetch_add(1, std::memory_order_relaxed);
    bytes_.fetch_add(cost, std::memory_order_relaxed);
    inserts_.fetch_add(1, std::memory_order_relaxed);
}

void CacheShard::prefetch_bucket(uint64_t hash) {
    const auto hash32 = static_cast<uint32_t>(hash >> 32);
    MutexLock lock(mu_);
    __builtin_prefetch(&state_.buckets[hash32 & (bucket_count_ - 1)], 1);
}

void CacheShard::set_budget(size_t budget_bytes) {
    // The bucket array was sized for the budget at start and stays: a budget cut below it
    // still leaves entries half of the new budget, so the cache keeps caching (and evicting)
    // instead of refusing every insert.
    const size_t buckets = bucket_count_ * sizeof(Entry*);
    const size_t entries = budget_bytes > 2 * buckets ? budget_bytes - buckets : budget_bytes / 2;
    entry_budget_.store(entries, std::memory_order_relaxed);
}

size_t CacheShard::flush() {
    std::vector<Entry*> fresh_buckets(bucket_count_, nullptr);
    std::vector<Entry*> old_ring;
    old_ring.reserve(bucket_count_);
    {
        MutexLock lock(mu_);
        State* s = &state_;
        s->buckets.swap(fresh_buckets);
        s->ring.swap(old_ring);
        s->hand = 0;
        s->reclaim_cursor = 0;
        s->bytes = 0;
        entries_.store(0, std::memory_order_relaxed);
        bytes_.store(0, std::memory_order_relaxed);
    }
    // Freed after unlocking: queries on this shard waited only for the swap.
    for (Entry* e : old_ring) std::free(e);
    return old_ring.size();
}

size_t CacheShard::flush_name(dns::Bytes lower_name, uint64_t hash) {
    const auto hash32 = static_cast<uint32_t>(hash >> 32);
    size_t removed = 0;
    MutexLock lock(mu_);
    State* s = &state_;
    Entry* e = s->buckets[hash32 & (bucket_count_ - 1)];
    while (e != nullptr) {
        Entry* next = e->next;
        if (e->hash32 == hash32 && e->name_len == lower_name.size() &&
            std::memcmp(e->name(), lower_name.data(), lower_name.size()) == 0) {
            remove(e);
            ++removed;
        }
        e = next;
    }
    return removed;
}

size_t CacheShard::flush_slice_where(size_t slice, const std::function<bool(dns::Bytes)>& matches) {
    const size_t begin = slice * kSliceBuckets;
    const size_t end = std::min(bucket_count_, begin + kSliceBuckets);
    size_t removed = 0;
    MutexLock lock(mu_);
    State* s = &state_;
    for (size_t b = begin; b < end; ++b) {
        Entry* e = s->buckets[b];
        while (e != nullptr) {
            Entry* next = e->next;
            if (matches(dns::Bytes(e->name(), e->name_len))) {
                remove(e);
                ++removed;
            }
            e = next;
        }
    }
    return removed;
}

size_t CacheShard::flush_suffix_slice(size_t slice, dns::Bytes lower_suffix) {
    return flush_slice_where(
        slice, [&](dns::Bytes name) { return dns::name_has_suffix(name, lower_suffix); });
}

size_t CacheShard::flush_matching_slice(size_t slice, const NameSet& names) {
    return flush_slice_where(slice, [&](dns::Bytes name) { return names.covers(name); });
}

size_t CacheShard::slice_count() const {
    return (bucket_count_ + kSliceBuckets - 1) / kSliceBuckets;
}

size_t CacheShard::snapshot_slice(size_t slice, uint64_t now_ms, std::vector<EntrySnapshot>& out,
                                  size_t first) {
    const size_t begin = slice * kSliceBuckets;
    const size_t end = std::min(bucket_count_, begin + kSliceBuckets);
    MutexLock lock(mu_);
    State* s = &state_;
    for (size_t b = begin; b < end; ++b) {
        for (const Entry* e = s->buckets[b]; e != nullptr; e = e->next) {
            if (is_dead(e, now_ms)) continue;
            if (first == out.size()) out.emplace_back();
            EntrySnapshot& snap = out[first++];
            snap.name.assign(e->name(), e->name() + e->name_len);
            snap.qtype = e->qtype;
            snap.qclass = e->qclass;
            snap.key_flags = e->key_flags;
            snap.born_ms = e->born_ms;
            PreparedAnswer& a = snap.answer;
            a.kind = e->kind();
            a.rcode = e->rcode;
            a.ad = (e->kind_ad & 0x80) != 0;
            a.ancount = e->ancount;
            a.nscount = e->nscount;
            a.arcount = e->arcount;
            a.ttl = e->ttl_s;
            a.records.assign(e->records(), e->records() + e->records_len);
            a.ttl_offsets.assign(e->ttl_offsets(), e->ttl_offsets() + e->ttl_count);
            a.ede.assign(e->ede(), e->ede() + e->ede_len);
        }
    }
    return first;
}

void CacheShard::add_counters(CacheCounters& c) const {
    c.entries += entries_.load(std::memory_order_relaxed);
    c.bytes += bytes_.load(std::memory_order_relaxed) + bucket_count_ * sizeof(Entry*);
    c.evictions += evictions_.load(std::memory_order_relaxed);
    c.expirations += expirations_.load(std::memory_order_relaxed);
    c.inserts += inserts_.load(std::memory_order_relaxed);
}

}  // namespace nscache::cache
