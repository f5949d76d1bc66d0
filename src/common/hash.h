// SPDX-License-Identifier: BSD-3-Clause
// The daemon's hash helpers. seeded_hash: for names that clients choose; with a secret
// per-process seed an attacker cannot aim many names at one bucket chain (hash flooding).
// fnv1a: unseeded, for what must hash alike across processes, hosts and releases (the cache
// file's checksum, the shared tier's names of forward rules); never for a table keyed by what
// clients send.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nscache {

inline uint64_t mix128(uint64_t a, uint64_t b) {
    const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
    return static_cast<uint64_t>(product) ^ static_cast<uint64_t>(product >> 64);
}

// Reads 8 bytes at a time and folds each through a 64x64->128 multiply keyed by the seed.
inline uint64_t seeded_hash(uint64_t seed, const uint8_t* data, size_t len) {
    constexpr uint64_t k1 = 0x9E3779B97F4A7C15ull;
    constexpr uint64_t k2 = 0xD6E8FEB86659FD93ull;
    uint64_t h = seed ^ (len * k1);
    size_t i = 0;
    for (; i + 8 <= len; i += 8) {
        uint64_t word;
        std::memcpy(&word, data + i, 8);
        h = mix128(h ^ word, k2 ^ seed);
    }
    uint64_t tail = 0;
    std::memcpy(&tail, data + i, len - i);
    h = mix128(h ^ tail ^ (uint64_t{len - i} << 59), k1 ^ seed);
    return mix128(h, k2);
}

inline constexpr uint64_t kFnv1aBasis = 0xcbf29ce484222325ull;

// FNV-1a, 64 bit. Incremental: pass the previous result as `h` to hash a sequence of parts as
// one run of bytes.
inline uint64_t fnv1a(const uint8_t* data, size_t len, uint64_t h = kFnv1aBasis) {
    for (size_t i = 0; i < len; ++i) {
        h ^= data[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

}  // namespace nscache
