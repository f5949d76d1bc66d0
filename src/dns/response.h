// SPDX-License-Identifier: BSD-3-Clause
// The forwarder's side of the wire: writing a query for an upstream server, checking that an
// answer belongs to it, and walking the answer's records. Pure functions on byte spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "dns/wire.h"

namespace nscache::dns {

struct UpstreamQuestion {
    Bytes qname;  // uncompressed wire name, lower-cased
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    bool do_bit = false;  // ask for DNSSEC records (RFC 3225)
    bool cd = false;      // checking disabled (RFC 4035 §3.2.2)
};

// Writes a recursive query with an OPT record advertising `udp_size`, and a COOKIE option
// (RFC 7873 §4) holding `cookie` when it is not empty (8 to 40 bytes). `out` must hold
// kMaxUpstreamQuery bytes. Returns the length.
inline constexpr size_t kMaxCookieOptionData = 40;
inline constexpr size_t kMaxUpstreamQuery =
    kHeaderSize + kMaxNameLength + 4 + 11 + 4 + kMaxCookieOptionData;
size_t write_upstream_query(const UpstreamQuestion& q, uint16_t id, uint16_t udp_size,
                            std::span<uint8_t> out, Bytes cookie = {});

// Pads a query from write_upstream_query (its OPT record last, with no cookie) to a multiple of 128
// octets with an EDNS Padding option (RFC 7830, block size per RFC 8467 §4.1), as DNS over TLS
// queries are sent. `out` must hold kMaxPaddedUpstreamQuery bytes. Returns the new length.
inline constexpr size_t kPaddingBlock = 128;
inline constexpr size_t kMaxPaddedUpstreamQuery = kMaxUpstreamQuery + 4 + kPaddingBlock;
size_t pad_upstream_query(std::span<uint8_t> out, size_t length);

// True when `msg` is a response (QR=1, opcode QUERY) with our ID and exactly our question
// (name compared without regard to case). Anything else is a forgery or a stray.
bool answers_question(Bytes msg, uint16_t id, const UpstreamQuestion& q);

enum class Section : uint8_t { Answer, Authority, Additional };

struct ScannedRecord {
    size_t ttl_offset = 0;
    uint32_t ttl = 0;
    uint16_t type = 0;
    Section section = Section::Answer;
    uint32_t soa_minimum = 0;  // for an SOA record only
    size_t owner_offset = 0;
    uint16_t rclass = 0;
};

// The structure of a whole response, every record checked.
struct ScannedResponse {
    Header header;
    size_t records_offset = 0;  // just after the question
    size_t records_end = 0;     // end of the last record that is not the OPT
    bool has_opt = false;
    bool opt_is_last = true;      // the OPT is the message's last record
    size_t opt_rdata_offset = 0;  // the OPT's options (RFC 6891 §6.1.2)
    uint16_t opt_rdlength = 0;
    uint16_t extended_rcode = 0;         // RCODE with the OPT's high bits
    std::vector<ScannedRecord> records;  // every record but the OPT, in message order
    std::vector<size_t> ttl_fields;      // every record's TTL offset, the OPT's included
};

// Walks every record of a response with exactly one question. False when anything is
// malformed: a bad name, a record past the end, bad rdata in a name-bearing type, an OPT
// outside the additional section or twice, or a compressed name that reads a TTL field or
// bytes that do not precede it (the cache sends these records again with new TTLs and
// without what follows them).
bool scan_response(Bytes msg, ScannedResponse& out);

}  // namespace nscache::dns
