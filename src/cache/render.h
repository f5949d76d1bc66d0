// SPDX-License-Identifier: BSD-3-Clause
// Writes the answer a client gets from a stored answer: header with the client's ID and bits,
// the client's question byte for byte, the stored records with their TTLs counted down, and
// an OPT if the client sent one. This is the whole work of a cache hit besides the lookup.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/answer.h"
#include "dns/query.h"

namespace nscache::cache {

// RFC 8767 §4: stale answers go out with a short TTL so clients come back soon.
inline constexpr uint32_t kStaleAnswerTtl = 30;

struct RenderLimits {
    size_t max_size = dns::kMinUdpPayload;  // the most the transport may carry to this client
    uint16_t server_udp_size = 1232;        // what our OPT record advertises
};

// `age_s` is subtracted from every TTL (saturating at 0); with `stale` every TTL becomes
// kStaleAnswerTtl. When the answer would exceed limits.max_size, writes instead an empty
// answer with TC=1 (RFC 1035 §4.1.1, RFC 6891 §7) and sets *truncated. `out` must hold
// max_size bytes. Returns the length written.
size_t render_answer(const AnswerView& answer, const dns::Query& query, uint32_t age_s, bool stale,
                     const RenderLimits& limits, std::span<uint8_t> out, bool* truncated);

// The largest answer size allowed for a UDP client: its EDNS buffer, or 512 without EDNS,
// never more than our own configured maximum.
inline size_t udp_answer_limit(const dns::Query& q, uint16_t server_udp_size) {
    if (!q.edns.present) return dns::kMinUdpPayload;
    const uint16_t ours =
        server_udp_size < dns::kMinUdpPayload ? dns::kMinUdpPayload : server_udp_size;
    return q.edns.udp_size < ours ? q.edns.udp_size : ours;
}

}  // namespace nscache::cache
