// SPDX-License-Identifier: BSD-3-Clause
// Connections per client address, across all workers, for the per-client TCP cap: one
// address (or a few) must not take every connection the daemon allows. Thread-safe: sharded
// by a seeded hash of the address, each shard behind its own mutex (held for one map update).
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <unordered_map>

#include "common/mutex.h"

namespace nscache::server {

class ClientCounts {
  public:
    ClientCounts();

    // Counts one more connection from `client`; false (nothing counted) at `limit`.
    bool acquire(const sockaddr* client, uint32_t limit);
    void release(const sockaddr* client);
    uint32_t count(const sockaddr* client);

  private:
    using Key = std::array<uint8_t, 17>;  // family tag + 16 address bytes
    struct KeyHash {
        uint64_t seed;
        size_t operator()(const Key& k) const;
    };
    struct Shard {
        Mutex mu;
        std::unordered_map<Key, uint32_t, KeyHash> counts NSCACHE_GUARDED_BY(mu);
    };
    static constexpr size_t kShards = 16;

    static Key key_of(const sockaddr* client);
    Shard& shard_for(const Key& key);

    const KeyHash hash_;
    Shard shards_[kShards];
};

}  // namespace nscache::server
