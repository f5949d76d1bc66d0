// SPDX-License-Identifier: BSD-3-Clause
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
    // The query carried a Padding option (RFC 7830): over an encrypted transport the answer
    // is padded too (RFC 8467 §4.1).
    bool padding = false;
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
    FormErr,  // malformed question, qdcount != 1, answer or authority records, malformed
              // records, several OPTs
    NotImp,   // opcode other than QUERY, or a zone-transfer/mailbox qtype
    BadVers,  // EDNS version above 0 (RFC 6891 §6.1.3)
};

struct ParsedQuery {
    QueryVerdict verdict = QueryVerdict::Ignore;
    Query query;  // fields are filled as far as parsing got: header always when not Ignore
    bool question_valid = false;
};

// Parsing comes in two steps, so that a server decides whom it answers before it reads more
// than the header and the question, whatever a sender put after them.
//
// parse_query_question reads the header and the question: bounded work (one uncompressed
// name). Verdict Ok means "read on"; a query with answer or authority records is FormErr
// here (a query has none, and each would be a name to walk).
ParsedQuery parse_query_question(Bytes msg);

// Reads the additional records after a question that parse_query_question passed (verdict
// Ok): sets the verdict, and the EDNS fields from the OPT record.
void parse_query_records(Bytes msg, ParsedQuery& parsed);

// Both steps.
ParsedQuery parse_query(Bytes msg);

// For an answer written before parse_query_records (REFUSED, rate limited): the client's OPT
// when it is the first record after the question, read in constant time. Such an answer is
// never longer than the query: header, the query's question, and an OPT only where the query
// had one.
void peek_query_edns(Bytes msg, ParsedQuery& parsed);

// Writes an answer carrying `rcode` and no records to `out`: the client's ID, opcode and RD,
// for a standard query (opcode QUERY) RA and the client's CD, its question if it was valid, and an
// OPT record advertising `server_udp_size` if the client sent a valid one. `extended_rcode` above
// 15 (BADVERS) goes into the OPT record, and so does an Extended DNS Error `ede` (RFC 8914) when
// given. Returns the length written; `out` must hold at least kMaxErrorAnswer bytes.
inline constexpr size_t kOptRecordSize = 11;
inline constexpr size_t kMaxErrorAnswer = kHeaderSize + kMaxNameLength + 4 + kOptRecordSize + 6;
inline constexpr uint32_t kNoEde = 0x10000;
size_t write_error_answer(const ParsedQuery& parsed, uint16_t extended_rcode,
                          uint16_t server_udp_size, std::span<uint8_t> out, uint32_t ede = kNoEde);

// Appends the server's OPT record at `out` (11 bytes): our UDP size, DO echoed, the high bits
// of an extended RCODE, and an RDLENGTH of `options_length` (the caller writes the options
// right after).
void write_opt_record(uint8_t* out, uint16_t udp_size, bool do_bit, uint16_t extended_rcode,
                      uint16_t options_length = 0);

}  // namespace nscache::dns
