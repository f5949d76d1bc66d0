// SPDX-License-Identifier: BSD-3-Clause
// Sharded<T, N>: N copies of T, each behind its own mutex on its own cache line, so that
// threads touching different shards neither wait on one lock nor share a line (false
// sharing). A shard's T can be reached only through with() or try_with(), which hold its
// mutex for the callback: the type says which lock guards what (as dnsdist's LockGuarded).
//
// Guarantees:
// - with(i, fn) locks shard i % N only, for as long as fn runs; fn must not lock another
//   shard or call out of its layer (the daemon's lock rule: one mutex at a time).
// - try_with() never waits: a busy shard is reported as such (the hot path treats busy as a
//   miss instead of queueing behind another thread).
// - Thread-safe; N must be a power of two (the shard is picked with a mask of a hash).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>

#include "common/mutex.h"

namespace nscache {

template <typename T, size_t N>
class Sharded {
    static_assert(N > 0 && (N & (N - 1)) == 0, "Sharded<T, N>: N must be a power of two");

  public:
    static constexpr size_t kShards = N;

    // Every shard's T built from the same arguments (none: T's default constructor).
    template <typename... Args>
    explicit Sharded(const Args&... args) {
        for (Shard& s : shards_) {
            MutexLock lock(s.mu);
            s.value.emplace(args...);
        }
    }
    Sharded(const Sharded&) = delete;
    Sharded& operator=(const Sharded&) = delete;

    static constexpr size_t index_of(uint64_t hash) { return static_cast<size_t>(hash & (N - 1)); }

    // Runs fn(T&) with shard `hash % N` locked; returns what fn returns.
    template <typename Fn>
    decltype(auto) with(uint64_t hash, Fn&& fn) {
        Shard& s = shards_[index_of(hash)];
        MutexLock lock(s.mu);
        return fn(*s.value);
    }
    template <typename Fn>
    decltype(auto) with(uint64_t hash, Fn&& fn) const {
        const Shard& s = shards_[index_of(hash)];
        MutexLock lock(s.mu);
        return fn(*s.value);
    }

    // As with(), but false (fn not run) when another thread holds the shard.
    template <typename Fn>
    bool try_with(uint64_t hash, Fn&& fn) {
        Shard& s = shards_[index_of(hash)];
        if (!s.mu.try_lock()) return false;
        fn(*s.value);
        s.mu.unlock();
        return true;
    }

    // Runs fn(T&) on every shard in turn, one lock at a time (never two at once).
    template <typename Fn>
    void for_each(Fn&& fn) {
        for (Shard& s : shards_) {
            MutexLock lock(s.mu);
            fn(*s.value);
        }
    }
    template <typename Fn>
    void for_each(Fn&& fn) const {
        for (const Shard& s : shards_) {
            MutexLock lock(s.mu);
            fn(*s.value);
        }
    }

  private:
    // std::optional only so that a T without a default constructor can be built from the
    // constructor's arguments; it holds a value from the constructor on.
    struct alignas(64) Shard {
        mutable Mutex mu;
        std::optional<T> value NSCACHE_GUARDED_BY(mu);
    };

    std::array<Shard, N> shards_;
};

}  // namespace nscache
