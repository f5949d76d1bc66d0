// SPDX-License-Identifier: BSD-3-Clause
// Resolution failures remembered for a while (RFC 9520 §3.2): when no upstream answered a
// question (timeouts, network errors), the same question within the next few seconds gets
// SERVFAIL at once instead of another round of upstream queries and another wait. Repeated
// failures of one question back off exponentially, from `initial_ms` up to `max_ms`; an
// answer clears the record.
//
// A fixed table, direct-mapped by a seeded hash of the question: O(1) per call and bounded
// memory whatever the number of names. Two questions on one slot evict each other (at worst
// one more upstream round). Thread-safe: 16 shards (Sharded<T, N>: each behind its own mutex
// on its own cache line), a shard's lock held for one slot update.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/sharded.h"

namespace nscache::upstream {

// Why the question failed, for the client's Extended DNS Error (RFC 8914).
enum class FailureReason : uint8_t {
    Overloaded = 0,             // not asked at all (this daemon was at its limit): no EDE
    NoReachableAuthority = 22,  // every upstream timed out
    NetworkError = 23,          // sends or connections failed
};

struct FailurePolicy {
    uint32_t initial_ms = 5'000;
    uint32_t max_ms = 60'000;
};

class FailureCache {
  public:
    explicit FailureCache(FailurePolicy policy, size_t slots = 1 << 16);

    // `key_hash`: the question's Question::key_hash() (seeded with the cache's secret, so
    // clients cannot aim names at one slot), never recomputed here.
    // Records that the question failed at `now_ms`; returns how long it stays failed.
    uint32_t record(uint64_t key_hash, FailureReason reason, uint64_t now_ms);
    // Why the question failed, if it failed recently enough to be answered SERVFAIL now.
    bool failing(uint64_t key_hash, uint64_t now_ms, FailureReason* reason) const;
    // An answer came: the next failure starts the backoff afresh.
    void clear(uint64_t key_hash);
    void clear_all();
    // A reload's new times; records made before keep theirs.
    void set_policy(FailurePolicy policy) {
        initial_ms_.store(policy.initial_ms, std::memory_order_relaxed);
        max_ms_.store(policy.max_ms, std::memory_order_relaxed);
    }

  private:
    struct Slot {
        uint64_t key_hash = 0;  // 0: empty
        uint64_t until_ms = 0;
        uint32_t backoff_ms = 0;
        FailureReason reason = FailureReason::NoReachableAuthority;
    };
    static constexpr size_t kShards = 16;
    using Slots = std::vector<Slot>;

    std::atomic<uint32_t> initial_ms_;
    std::atomic<uint32_t> max_ms_;
    const size_t slots_;
    Sharded<Slots, kShards> shards_;
};

}  // namespace nscache::upstream
