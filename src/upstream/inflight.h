// SPDX-License-Identifier: BSD-3-Clause
// Coalescing: identical questions in flight share one upstream query. The first asker (the
// leader) sends it; later askers are added as waiters and all get the one answer.
// Thread-safe: sharded by key (Sharded<T, N>: 16 shards, each behind its own mutex on its own
// cache line), a shard's lock held only to add or take waiters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/sharded.h"

namespace nscache::upstream {

// Who is waiting: the worker thread that holds the client, and its token for the client.
struct Waiter {
    uint32_t worker = 0;
    uint64_t cookie = 0;
};

enum class JoinResult { Leader, Joined, Full };

class InflightTable {
  public:
    InflightTable();

    // Bounds memory under a flood of one name: waiters past this are turned away (Full).
    static constexpr size_t kMaxWaitersPerQuery = 1024;

    // Adds `waiter` under `key`. Leader: nothing was in flight, the caller must send the query
    // and later call finish(). A refresh (prefetch) passes no waiter.
    JoinResult join(const std::string& key, const Waiter* waiter);
    // Removes the key and hands back its waiters.
    std::vector<Waiter> finish(const std::string& key);
    // Removes one waiter (its client was answered some other way, e.g. from a stale entry).
    void leave(const std::string& key, const Waiter& waiter);

  private:
    static constexpr size_t kShards = 16;
    // Keys are client-chosen names: hashed with a secret seed (no chain flooding).
    struct SeededHash {
        uint64_t seed;
        size_t operator()(const std::string& key) const;
    };
    using Queries = std::unordered_map<std::string, std::vector<Waiter>, SeededHash>;
    // The shard: the hash's top 4 bits (the map's buckets take its low bits).
    uint64_t shard_of(const std::string& key) const { return hash_(key) >> 60; }

    const SeededHash hash_;
    Sharded<Queries, kShards> shards_;
};

}  // namespace nscache::upstream
