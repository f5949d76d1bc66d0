// SPDX-License-Identifier: BSD-3-Clause
// Per-client-prefix rate limit for UDP queries from non-loopback clients: a token bucket per
// /24 (IPv4) or /56 (IPv6), so one network cannot take the daemon's capacity or use it to
// reflect traffic at a spoofed victim. TCP is not limited (its source cannot be spoofed, and
// "truncate" sends limited clients there).
//
// The buckets live in a fixed-size table, direct-mapped by a seeded hash of the prefix: O(1)
// per query and bounded memory whatever the number of clients. A prefix that lands on a slot
// held by another takes it over with a full bucket; with a secret seed an attacker cannot aim
// at someone else's slot. Thread-safe: the table is a Sharded<> of 16 shards, each lock held
// for one bucket update.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <vector>

#include "common/sharded.h"

namespace nscache::server {

class RateLimiter {
  public:
    // `rate` queries per second per prefix, bursts of `burst` (0: same as rate).
    RateLimiter(uint32_t rate, uint32_t burst, size_t slots = 1 << 16);

    // True when the query may go on; false when it is over the limit.
    bool allow(const sockaddr* client, uint64_t now_ms);

  private:
    struct Bucket {
        uint64_t prefix_hash = 0;  // 0: empty
        uint64_t last_ms = 0;
        uint64_t milli_tokens = 0;  // tokens * 1000 (a burst of 10 million fits)
    };
    // A slot's bucket lives in shard (slot % kShards), at index slot / kShards.
    static constexpr size_t kShards = 16;

    const uint64_t rate_;
    const uint64_t burst_milli_;
    const uint64_t seed_;
    const size_t slots_;
    Sharded<std::vector<Bucket>, kShards> shards_;
};

}  // namespace nscache::server
