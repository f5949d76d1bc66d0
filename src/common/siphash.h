// SPDX-License-Identifier: BSD-3-Clause
// SipHash-2-4 (Aumasson and Bernstein, 2012): a keyed pseudo-random function with a 128-bit
// key and a 64-bit output, for values an attacker must not predict or link without the key
// (DNS client cookies, RFC 7873 §4.1; RFC 9018 uses it for server cookies). Pure function,
// any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nscache {

struct SipKey {
    uint64_t k0 = 0;
    uint64_t k1 = 0;
};

namespace detail {

inline uint64_t rotl64(uint64_t x, int b) {
    return (x << b) | (x >> (64 - b));
}

inline void sip_round(uint64_t& v0, uint64_t& v1, uint64_t& v2, uint64_t& v3) {
    v0 += v1;
    v1 = rotl64(v1, 13);
    v1 ^= v0;
    v0 = rotl64(v0, 32);
    v2 += v3;
    v3 = rotl64(v3, 16);
    v3 ^= v2;
    v0 += v3;
    v3 = rotl64(v3, 21);
    v3 ^= v0;
    v2 += v1;
    v1 = rotl64(v1, 17);
    v1 ^= v2;
    v2 = rotl64(v2, 32);
}

inline uint64_t load_le64(const uint8_t* p) {
    uint64_t x = 0;
    for (int i = 7; i >= 0; --i) x = (x << 8) | p[i];
    return x;
}

}  // namespace detail

inline uint64_t siphash24(const SipKey& key, const uint8_t* data, size_t len) {
    using detail::sip_round;
    uint64_t v0 = 0x736f6d6570736575ull ^ key.k0;
    uint64_t v1 = 0x646f72616e646f6dull ^ key.k1;
    uint64_t v2 = 0x6c7967656e657261ull ^ key.k0;
    uint64_t v3 = 0x7465646279746573ull ^ key.k1;
    const size_t whole = len - len % 8;
    for (size_t i = 0; i < whole; i += 8) {
        const uint64_t m = detail::load_le64(data + i);
        v3 ^= m;
        sip_round(v0, v1, v2, v3);
        sip_round(v0, v1, v2, v3);
        v0 ^= m;
    }
    uint64_t last = static_cast<uint64_t>(len & 0xff) << 56;
    for (size_t i = 0; i < len % 8; ++i) last |= static_cast<uint64_t>(data[whole + i]) << (8 * i);
    v3 ^= last;
    sip_round(v0, v1, v2, v3);
    sip_round(v0, v1, v2, v3);
    v0 ^= last;
    v2 ^= 0xff;
    for (int i = 0; i < 4; ++i) sip_round(v0, v1, v2, v3);
    return v0 ^ v1 ^ v2 ^ v3;
}

}  // namespace nscache
