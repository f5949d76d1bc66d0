// SPDX-License-Identifier: BSD-3-Clause
// An upstream answer made ready to serve: the bytes after the question (OPT removed), with the
// offset of every TTL field, so that serving it is copy and patch. Also the TTL rules that
// decide how long it may be cached (clamps, RFC 2308 negative TTL, short SERVFAIL).
//
// PreparedAnswer owns its bytes; AnswerView is what the renderer reads, from either a
// PreparedAnswer or a cache entry.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "dns/response.h"
#include "dns/wire.h"

namespace nscache::cache {

struct TtlPolicy {
    uint32_t min_ttl = 0;
    uint32_t max_ttl = 86400;
    uint32_t negative_max_ttl = 3600;
    uint32_t servfail_ttl = 3;
};

enum class AnswerKind : uint8_t { Positive, Negative, ServFail };

// An upstream's Extended DNS Error options kept with its answer; longer ones are dropped.
inline constexpr size_t kMaxEdeBytes = 255;

struct AnswerView {
    uint8_t rcode = 0;
    bool ad = false;  // the upstream's Authenticated Data bit
    uint16_t ancount = 0;
    uint16_t nscount = 0;
    uint16_t arcount = 0;
    std::span<const uint8_t> records;       // wire bytes after the question
    std::span<const uint16_t> ttl_offsets;  // into `records`
    std::span<const uint8_t> ede;           // the upstream's EDE options (RFC 8914), as sent
    bool aa = false;  // authoritative: an answer nscache gives from its own local data
};

struct PreparedAnswer {
    AnswerKind kind = AnswerKind::Positive;
    uint8_t rcode = 0;
    bool ad = false;
    uint16_t ancount = 0;
    uint16_t nscount = 0;
    uint16_t arcount = 0;
    uint32_t ttl = 0;  // how long it may be cached, seconds; 0: serve it, don't keep it
    std::vector<uint8_t> records;
    std::vector<uint16_t> ttl_offsets;
    std::vector<uint8_t> ede;  // at most kMaxEdeBytes
    bool aa = false;           // local data (never cached, so entries need no room for it)

    AnswerView view() const {
        return AnswerView{rcode, ad, ancount, nscount, arcount, records, ttl_offsets, ede, aa};
    }
};

// Builds a PreparedAnswer from a validated upstream response (`scan` from scan_response over
// `msg`). Every record's TTL is rewritten to what the policy allows, and every RRset gets the
// lowest TTL of its records (RFC 2181 §5.2). The upstream's EDE options are kept. nullopt when the
// answer cannot be served from stored bytes: an extended RCODE, TC set, or an OPT that is not the
// last record (removing it would move records that compression pointers may target).
std::optional<PreparedAnswer> prepare_answer(dns::Bytes msg, const dns::ScannedResponse& scan,
                                             const TtlPolicy& policy);

// The same into `out`, reusing its vectors' capacity (a cache file's million entries are
// prepared one after another into one PreparedAnswer). False where prepare_answer gives
// nullopt; `out` is then unspecified.
bool prepare_answer_into(dns::Bytes msg, const dns::ScannedResponse& scan, const TtlPolicy& policy,
                         PreparedAnswer& out);

}  // namespace nscache::cache
