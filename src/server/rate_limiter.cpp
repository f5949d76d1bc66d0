// SPDX-License-Identifier: BSD-3-Clause
#include "server/rate_limiter.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "common/hash.h"
#include "common/random.h"

namespace nscache::server {
namespace {

// The bytes that identify a client's network: /24 of IPv4 (IPv4-mapped IPv6 too), /56 of IPv6.
size_t prefix_bytes(const sockaddr* sa, uint8_t out[8]) {
    if (sa->sa_family == AF_INET) {
        std::memcpy(out, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 3);
        return 3;
    }
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        std::memcpy(out, in6->sin6_addr.s6_addr + 12, 3);
        return 3;
    }
    std::memcpy(out, in6->sin6_addr.s6_addr, 7);
    out[7] = 6;  // keeps IPv6 prefixes apart from IPv4 ones
    return 8;
}

}  // namespace

RateLimiter::RateLimiter(uint32_t rate, uint32_t burst, size_t slots)
    : rate_(rate),
      burst_milli_(uint64_t{burst == 0 ? rate : burst} * 1000),
      seed_(secure_random_u64()),
      slots_(std::max<size_t>(slots, kShards)),
      shards_((slots_ + kShards - 1) / kShards) {}

bool RateLimiter::allow(const sockaddr* client, uint64_t now_ms) {
    uint8_t prefix[8];
    const size_t len = prefix_bytes(client, prefix);
    const uint64_t hash = seeded_hash(seed_, prefix, len) | 1;  // never 0, the empty mark
    const size_t slot = hash % slots_;
    // Sharded<> picks the shard from the low bits: slot % kShards.
    return shards_.with(slot, [&](std::vector<Bucket>& buckets) {
        Bucket& b = buckets[slot / kShards];
        if (b.prefix_hash != hash) {
            b.prefix_hash = hash;
            b.milli_tokens = burst_milli_;
            b.last_ms = now_ms;
        } else if (now_ms > b.last_ms) {
            // rate tokens per second = rate milli-tokens per millisecond.
            const uint64_t refill = (now_ms - b.last_ms) * rate_;
            b.milli_tokens = std::min(burst_milli_, b.milli_tokens + refill);
            b.last_ms = now_ms;
        }
        if (b.milli_tokens < 1000) return false;
        b.milli_tokens -= 1000;
        return true;
    });
}

}  // namespace nscache::server
