// SPDX-License-Identifier: BSD-3-Clause
// Connections per client address, across all workers, for the per-client TCP cap: one
// address (or a few) must not take every connection the daemon allows. Thread-safe: sharded
// by a seeded hash of the address into a Sharded<> of 16 maps, each lock held for one map
// update.
#pragma once

#include <sys/socket.h>

#include <array>
#include <cstdint>
#include <unordered_map>

#include "common/sharded.h"

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
    using Counts = std::unordered_map<Key, uint32_t, KeyHash>;
    static constexpr size_t kShards = 16;

    static Key key_of(const sockaddr* client);
    // The shard: the hash's top bits (the map's buckets use the low ones).
    uint64_t shard_of(const Key& key) const { return hash_(key) >> 60; }

    const KeyHash hash_;
    Sharded<Counts, kShards> shards_;
};

}  // namespace nscache::server
