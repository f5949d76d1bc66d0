// Parsing a client's query and writing the error answers a server sends without looking
// anything up (FORMERR, NOTIMP, REFUSED, SERVFAIL, BADVERS). Pure functions on byte spans.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dns/wire.h"

namespace nscache::dns {

// The client's EDNS0 OPT record (RFC 6891), if it sent one.
struct Edns {
    bool present = false;
    bool do_bit = false;
    uint8_t version = 0;
    uint16_t udp_size = kMinUdpPayload;  // already raised to 512 when the client said less
};

struct Query {
    Header header;
    Bytes question;  // qname + qtype + qclass, exactly as sent (case kept) for the echo
    Bytes qname;     // uncompressed wire name, as sent
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    Edns edns;

    bool rd() const { return header.has(flag::RD); }
    bool cd() const { return header.has(flag::CD); }
};

enum class QueryVerdict : uint8_t {
    Ok,
    Ignore,   // not answerable: shorter than a header, or QR=1 (a response; RFC 1035 §4.1.1)
    FormErr,  // malformed question, qdcount != 1, malformed records, several OPTs
    NotImp,   // opcode other than QUERY, or a zone-transfer/mailbox qtype
    BadVers,  // EDNS version above 0 (RFC 6891 §6.1.3)
};

struct ParsedQuery {
    QueryVerdict verdict = QueryVerdict::Ignore;
    Query query;  // fields are filled as far as parsing got: header always when not Ignore
    bool question_valid = false;
};

ParsedQuery parse_query(Bytes msg);

// Writes an answer carrying `rcode` and no records to `out`: the client's ID, opcode, RD and
// CD, its question if it was valid, and an OPT record if the client sent a valid one.
// `extended_rcode` above 15 (BADVERS) goes into the OPT record. Returns the length written;
// `out` must hold at least kMaxErrorAnswer bytes.
inline constexpr size_t kMaxErrorAnswer = kHeaderSize + kMaxNameLength + 4 + 11;
size_t write_error_answer(const ParsedQuery& parsed, uint16_t extended_rcode,
                          std::span<uint8_t> out);

// Appends the server's OPT record at `out` (11 bytes): our UDP size, DO echoed, and the high
// bits of an extended RCODE.
inline constexpr size_t kOptRecordSize = 11;
void write_opt_record(uint8_t* out, uint16_t udp_size, bool do_bit, uint16_t extended_rcode);

}  // namespace nscache::dns
