// SPDX-License-Identifier: BSD-3-Clause
// Coalescing: identical questions in flight share one upstream query. The first asker (the
// leader) sends it; later askers are added as waiters and all get the one answer. Keyed by the
// Question itself: its key_hash() (from the name's hash, computed once per client query)
// picks the shard and the bucket, so no key string is built and no name hashed here.
// Thread-safe: sharded by key (Sharded<T, N>: 16 shards, each behind its own mutex on its own
// cache line), a shard's lock held only to add or take waiters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/sharded.h"
#include "upstream/question.h"

namespace nscache::upstream {

// Who is waiting: the worker thread that holds the client, and its token for the client.
struct Waiter {
    uint32_t worker = 0;
    uint64_t cookie = 0;
};

enum class JoinResult { Leader, Joined, Full };

class InflightTable {
  public:
    InflightTable() : shards_(size_t{16}) {}

    // Bounds memory under a flood of one name: waiters past this are turned away (Full).
    static constexpr size_t kMaxWaitersPerQuery = 1024;

    // Every call takes a question whose name_hash is set (the Resolver sees to it).
    // Adds `waiter` under `question`. Leader: nothing was in flight, the caller must send the
    // query and later call finish(). A refresh (prefetch) passes no waiter.
    JoinResult join(const Question& question, const Waiter* waiter);
    // Removes the question and hands back its waiters.
    std::vector<Waiter> finish(const Question& question);
    // Takes back one join of `waiter` (its client was answered some other way, e.g. from a
    // stale entry): one matching waiter is removed, never more, so a pair joined twice still
    // waits once. Callers give each wait its own (worker, cookie) (a client's slot id; the
    // host lookup adds its search round), so no pair is joined twice in practice. Nothing
    // to do when the question finished meanwhile (its waiters were taken).
    void leave(const Question& question, const Waiter& waiter);

  private:
    static constexpr size_t kShards = 16;
    // Keys are client-chosen names: their hash is the cache's, seeded with a secret (no chain
    // flooding).
    struct KeyHash {
        size_t operator()(const Question& q) const { return q.key_hash(); }
    };
    struct SameKey {
        bool operator()(const Question& a, const Question& b) const { return a.same_key(b); }
    };
    using Queries = std::unordered_map<Question, std::vector<Waiter>, KeyHash, SameKey>;
    // The shard: the hash's top 4 bits (the map's buckets take its low bits).
    static uint64_t shard_of(const Question& q) { return q.key_hash() >> 60; }

    Sharded<Queries, kShards> shards_;
};

}  // namespace nscache::upstream
