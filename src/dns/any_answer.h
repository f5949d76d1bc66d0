// SPDX-License-Identifier: BSD-3-Clause
// The answer to a query for type ANY that the server writes itself (RFC 8482). A full ANY
// answer is a large reply to a small query (a reflection amplifier), so ANY is never
// forwarded as such nor cached. RFC 8482 §4.1 allows a subset of the name's RRsets: nscache
// answers with the name's A and AAAA RRsets (what stubs that send ANY want: c-ares'
// ares_query_any / Node's dns.resolveAny() find nothing in a lone HINFO), asked as the A and
// AAAA questions, and with one synthesized HINFO (§4.2) only for a name with neither. The
// answer is then no larger than the A and AAAA answers a client may ask for anyway.
// Pure functions on byte spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dns/query.h"
#include "dns/wire.h"

namespace nscache::dns {

// RFC 8482 leaves the TTL to the responder: an hour, so a client that keeps it does not ask
// again soon.
inline constexpr uint32_t kAnyAnswerTtl = 3600;

// HINFO rdata: CPU "RFC8482", OS "" (two character-strings).
inline constexpr size_t kAnyAnswerRdataSize = 1 + 7 + 1;
inline constexpr size_t kMaxAnyAnswer =
    kHeaderSize + kMaxNameLength + 4 + 2 + 10 + kAnyAnswerRdataSize + kOptRecordSize;

// Writes a NOERROR answer to `q` (a query with qtype ANY that parsed Ok): the client's ID,
// RD and CD, its question, one HINFO record owned by the question's name (class IN when the
// query asked for class ANY), and an OPT advertising `server_udp_size` if the client sent
// one. `out` must hold kMaxAnyAnswer bytes, which is under 512. Returns the length.
size_t write_any_answer(const Query& q, uint16_t server_udp_size, std::span<uint8_t> out);

// Writes the answer to `q` (qtype ANY, class IN) from `parts`: the answers to the name's A and
// AAAA questions, each a whole message as rendered for `q` itself (its ID, bits, question;
// TTLs already counted down), or an empty span for a question that failed. Takes the A, AAAA
// and covering RRSIG records owned by the question's name from each part's answer section;
// an NXDOMAIN part is the answer as it is (the name has no RRsets at all); no such record in
// parts that all answered: the HINFO of write_any_answer. Returns 0 when no part answered
// and one failed (the caller answers SERVFAIL). An answer over `max_size` goes out empty
// with TC=1 (*truncated set). `out` must hold max(max_size, kMaxAnyAnswer) bytes.
size_t write_any_from_parts(const Query& q, std::span<const Bytes> parts, uint16_t server_udp_size,
                            size_t max_size, std::span<uint8_t> out, bool* truncated);

}  // namespace nscache::dns
