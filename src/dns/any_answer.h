// The answer to a query for type ANY that the server writes itself (RFC 8482): one
// synthesized HINFO record instead of everything held for the name. A full ANY answer is a
// large reply to a small query (a reflection amplifier) and no stub resolver needs one, so
// such queries are never forwarded or cached. Pure function on byte spans.
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

}  // namespace nscache::dns
