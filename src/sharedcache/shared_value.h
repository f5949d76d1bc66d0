// SPDX-License-Identifier: BSD-3-Clause
// What the shared tier stores in Redis, and how a value read back is judged: the key (the
// local cache key's fields plus a format version, under the configured prefix) and the value
// (absolute wall-clock times, then the answer as the DNS message an upstream would send).
// Pure functions; any thread.
//
// A value is untrusted input: another host, or anyone who can write to Redis, may have put
// anything there. decode_value accepts it only as an upstream answer is accepted: it must
// answer exactly the question asked (name, type, class, DO, CD), pass the response scanner,
// and go through the daemon's own TTL policy (max-ttl bounds what it can bring); it is
// served with what is left of its TTL, so TTLs keep counting down from host to host.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cache/answer.h"
#include "cache/cache.h"

namespace nscache::sharedcache {

// Bumped when the value layout changes; it is part of every key, so hosts running another
// version never read each other's values.
inline constexpr char kFormatVersion = '1';

// "NSC1", written_at (u64 ms since the epoch), expires_at (u64), then the message.
inline constexpr size_t kValueHeaderSize = 20;
// The longest value read: a header and a DNS message of at most 64 KiB. A lookup reads no
// more than one byte past this (GETRANGE), so a huge value costs nothing to reject.
inline constexpr size_t kMaxValueBytes = kValueHeaderSize + 65535;

// "<prefix>1:<name>:<qtype>:<qclass>:<flags>", e.g. "nscache:1:www.example.com.:1:1:0", and
// ":@<domain>" after it for a question a [[forward]] rule other than the default sends to its
// own servers (`view`): hosts that route a domain elsewhere (split DNS) never share answers
// for it with hosts that send it to the default servers.
std::string shared_key(std::string_view prefix, const cache::CacheKey& key,
                       std::string_view view = {});

// The value for `answer` (fresh from upstream, its TTL starting now). Empty when the answer
// cannot be stored (a message over 64 KiB).
std::vector<uint8_t> encode_value(const cache::CacheKey& key, const cache::PreparedAnswer& answer,
                                  uint64_t wall_now_ms);

enum class ValueVerdict : uint8_t {
    Answer,     // usable: `answer` is set
    Expired,    // past its expiry (or, for a refresh, no fresher than the entry it would replace)
    Malformed,  // not a value of ours, or not a usable answer
    Oversized,  // longer than kMaxValueBytes
    Mismatch,   // a well-formed answer, but to another question
};

struct DecodedValue {
    ValueVerdict verdict = ValueVerdict::Malformed;
    std::optional<cache::PreparedAnswer> answer;  // TTLs already counted down to now
};

// Judges a value read for `key`. With `refresh` (a background refresh of an entry in its last
// 10%), a value is only taken if less than 90% of its lifetime has passed, that is if another
// host refreshed it since.
DecodedValue decode_value(std::span<const uint8_t> value, const cache::CacheKey& key,
                          const cache::TtlPolicy& policy, uint64_t wall_now_ms, bool refresh);

}  // namespace nscache::sharedcache
