// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/failure_cache.h"

#include <algorithm>

namespace nscache::upstream {

FailureCache::FailureCache(FailurePolicy policy, size_t slots)
    : initial_ms_(policy.initial_ms),
      max_ms_(policy.max_ms),
      slots_(std::max(slots, kShards)),
      shards_((slots_ + kShards - 1) / kShards) {}

uint32_t FailureCache::record(uint64_t key_hash, FailureReason reason, uint64_t now_ms) {
    const uint64_t h = key_hash | 1;  // 0 marks an empty slot
    const size_t index = key_hash % slots_;
    // The shard is index % kShards (Sharded masks the low bits), the slot index / kShards.
    return shards_.with(index, [&](Slots& slots) {
        Slot& s = slots[index / kShards];
        // Consecutive: the last failure's hold ended no longer ago than it lasted (the client
        // came back soon after, and it failed again).
        const bool consecutive =
            s.key_hash == h && s.backoff_ms != 0 && now_ms <= s.until_ms + s.backoff_ms;
        const uint32_t initial = initial_ms_.load(std::memory_order_relaxed);
        const uint32_t max = max_ms_.load(std::memory_order_relaxed);
        const uint64_t doubled = consecutive ? uint64_t{s.backoff_ms} * 2 : initial;
        s.backoff_ms = static_cast<uint32_t>(std::min<uint64_t>(doubled, max));
        s.key_hash = h;
        s.until_ms = now_ms + s.backoff_ms;
        s.reason = reason;
        return s.backoff_ms;
    });
}

bool FailureCache::failing(uint64_t key_hash, uint64_t now_ms, FailureReason* reason) const {
    const uint64_t h = key_hash | 1;  // 0 marks an empty slot
    const size_t index = key_hash % slots_;
    return shards_.with(index, [&](const Slots& slots) {
        const Slot& s = slots[index / kShards];
        if (s.key_hash != h || now_ms >= s.until_ms) return false;
        if (reason != nullptr) *reason = s.reason;
        return true;
    });
}

void FailureCache::clear(uint64_t key_hash) {
    const uint64_t h = key_hash | 1;  // 0 marks an empty slot
    const size_t index = key_hash % slots_;
    shards_.with(index, [&](Slots& slots) {
        Slot& s = slots[index / kShards];
        if (s.key_hash == h) s = Slot{};
    });
}

void FailureCache::clear_all() {
    shards_.for_each([](Slots& slots) { std::fill(slots.begin(), slots.end(), Slot{}); });
}

}  // namespace nscache::upstream
