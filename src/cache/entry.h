// SPDX-License-Identifier: BSD-3-Clause
// One cached answer in one allocation: a fixed header, then the TTL offsets, the key's name,
// the answer's record bytes and the upstream's Extended DNS Error options, if it sent any.
// Internal to the cache; guarded by its shard's lock.
//
// Layout matters because the cache's memory target is per entry: a typical A answer is a
// 48-byte header + 2 bytes of offsets + ~20 bytes of name + 16 bytes of record.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <span>

#include "cache/answer.h"

namespace nscache::cache {

struct Entry {
    Entry* next;         // bucket chain
    uint64_t born_ms;    // when it was stored (monotonic)
    uint32_t ttl_s;      // fresh for this long after born_ms
    uint32_t hash32;     // high bits of the name hash: a cheap first comparison
    uint32_t ring_slot;  // index in the shard's CLOCK ring
    uint16_t qtype;
    uint16_t qclass;
    uint16_t ancount;
    uint16_t nscount;
    uint16_t arcount;
    uint16_t records_len;
    uint16_t ttl_count;
    uint8_t name_len;
    uint8_t key_flags;
    uint8_t rcode;
    uint8_t kind_ad;             // AnswerKind in the low bits, AD in bit 7
    uint8_t visited : 1;         // CLOCK reference bit
    uint8_t prefetch_taken : 1;  // a refresh was started for this entry
    uint8_t ede_len;             // bytes of EDE options after the records

    const uint16_t* ttl_offsets() const { return reinterpret_cast<const uint16_t*>(this + 1); }
    const uint8_t* name() const {
        return reinterpret_cast<const uint8_t*>(ttl_offsets() + ttl_count);
    }
    const uint8_t* records() const { return name() + name_len; }
    const uint8_t* ede() const { return records() + records_len; }

    AnswerKind kind() const { return static_cast<AnswerKind>(kind_ad & 0x7F); }
    uint64_t expires_ms() const { return born_ms + uint64_t{ttl_s} * 1000; }

    AnswerView view() const {
        return AnswerView{rcode,
                          (kind_ad & 0x80) != 0,
                          ancount,
                          nscount,
                          arcount,
                          std::span<const uint8_t>(records(), records_len),
                          std::span<const uint16_t>(ttl_offsets(), ttl_count),
                          std::span<const uint8_t>(ede(), ede_len)};
    }

    static size_t allocation_size(size_t name_len, size_t ttl_count, size_t records_len,
                                  size_t ede_len) {
        return sizeof(Entry) + ttl_count * sizeof(uint16_t) + name_len + records_len + ede_len;
    }
};
static_assert(sizeof(Entry) == 48, "Entry header grew: it is paid once per cached answer");
static_assert(alignof(Entry) >= alignof(uint16_t));

}  // namespace nscache::cache
