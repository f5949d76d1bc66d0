// SPDX-License-Identifier: BSD-3-Clause
// Coalescing: identical questions in flight share one upstream query. The first asker (the
// leader) sends it; later askers are added as waiters and all get the one answer.
// Thread-safe: sharded by key, one mutex per shard, held only to add or take waiters.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/mutex.h"

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
    struct Shard {
        Mutex mu;
        std::unordered_map<std::string, std::vector<Waiter>, SeededHash> queries
            NSCACHE_GUARDED_BY(mu);
    };
    Shard& shard_for(const std::string& key);

    const SeededHash hash_;
    Shard shards_[kShards];
};

}  // namespace nscache::upstream
