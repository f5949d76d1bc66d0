// SPDX-License-Identifier: BSD-3-Clause
#include "dns/query.h"

#include <cstring>

#include "dns/ede.h"
#include "dns/name.h"
#include "dns/padding.h"
#include "dns/record.h"

namespace nscache::dns {
namespace {

bool is_transfer_or_mailbox(uint16_t qtype) {
    return qtype == rtype::AXFR || qtype == rtype::IXFR || qtype == rtype::MAILA ||
           qtype == rtype::MAILB;
}

Edns edns_of_opt(uint16_t rclass, uint32_t ttl) {
    Edns edns;
    edns.present = true;
    edns.udp_size = rclass < kMinUdpPayload ? kMinUdpPayload : rclass;
    edns.version = static_cast<uint8_t>(ttl >> 16);
    edns.do_bit = (ttl & kEdnsDoBit) != 0;
    return edns;
}

size_t records_offset(const Query& q) {
    return kHeaderSize + q.question.size();
}

}  // namespace

ParsedQuery parse_query_question(Bytes msg) {
    ParsedQuery parsed;
    if (msg.size() < kHeaderSize) return parsed;
    Query& q = parsed.query;
    q.header = read_header(msg);
    if (q.header.has(flag::QR)) return parsed;
    if (q.header.opcode() != 0) {
        parsed.verdict = QueryVerdict::NotImp;
        return parsed;
    }
    parsed.verdict = QueryVerdict::FormErr;
    if (q.header.qdcount != 1) return parsed;
    auto name = skip_uncompressed_name(msg, kHeaderSize);
    if (!name || name->end + 4 > msg.size()) return parsed;
    q.qname = msg.subspan(kHeaderSize, name->end - kHeaderSize);
    q.question = msg.subspan(kHeaderSize, name->end + 4 - kHeaderSize);
    q.qtype = read_u16(&msg[name->end]);
    q.qclass = read_u16(&msg[name->end + 2]);
    if (q.qtype == rtype::OPT) return parsed;
    parsed.question_valid = true;
    // Type 0 is reserved (RFC 6895 §3.1): no data has it, so no question may ask for it. It is
    // also the cache's NXDOMAIN-cut marker key (cache/nxdomain_cut.h): a TYPE0 answer cached
    // there once answered every name below it. FORMERR, never forwarded nor cached.
    if (q.qtype == 0) return parsed;
    if (q.header.ancount != 0 || q.header.nscount != 0) return parsed;
    parsed.verdict = QueryVerdict::Ok;
    return parsed;
}

void parse_query_records(Bytes msg, ParsedQuery& parsed) {
    Query& q = parsed.query;
    size_t offset = records_offset(q);
    for (size_t i = 0; i < q.header.arcount; ++i) {
        auto rr = read_record(msg, offset);
        if (!rr) {
            parsed.verdict = QueryVerdict::FormErr;
            return;
        }
        if (rr->type == rtype::OPT) {
            // RFC 6891 §6.1.1: at most once, owner is the root.
            if (q.edns.present || msg[rr->owner_offset] != 0) {
                parsed.verdict = QueryVerdict::FormErr;
                return;
            }
            q.edns = edns_of_opt(rr->rclass, rr->ttl);
            q.edns.padding =
                options_have_padding(Bytes(msg.data() + rr->rdata_offset, rr->rdlength));
        }
        offset = rr->end;
    }
    if (q.edns.version > 0) {
        parsed.verdict = QueryVerdict::BadVers;
    } else if (is_transfer_or_mailbox(q.qtype)) {
        parsed.verdict = QueryVerdict::NotImp;
    }
}

ParsedQuery parse_query(Bytes msg) {
    ParsedQuery parsed = parse_query_question(msg);
    if (parsed.verdict == QueryVerdict::Ok) parse_query_records(msg, parsed);
    return parsed;
}

void peek_query_edns(Bytes msg, ParsedQuery& parsed) {
    Query& q = parsed.query;
    if (parsed.verdict != QueryVerdict::Ok || q.header.arcount == 0 || q.edns.present) return;
    const size_t at = records_offset(q);
    // Root owner (one byte, no name to walk), type OPT, and the whole record in the message.
    if (at + kOptRecordSize > msg.size() || msg[at] != 0) return;
    if (read_u16(&msg[at + 1]) != rtype::OPT) return;
    if (at + kOptRecordSize + read_u16(&msg[at + 9]) > msg.size()) return;
    q.edns = edns_of_opt(read_u16(&msg[at + 3]), read_u32(&msg[at + 5]));
}

void write_opt_record(uint8_t* out, uint16_t udp_size, bool do_bit, uint16_t extended_rcode,
                      uint16_t options_length) {
    out[0] = 0;  // root owner
    write_u16(out + 1, rtype::OPT);
    write_u16(out + 3, udp_size);
    const uint32_t ttl =
        uint32_t{static_cast<uint8_t>(extended_rcode >> 4)} << 24 | (do_bit ? kEdnsDoBit : 0);
    write_u32(out + 5, ttl);
    write_u16(out + 9, options_length);
}

size_t write_error_answer(const ParsedQuery& parsed, uint16_t extended_rcode,
                          uint16_t server_udp_size, std::span<uint8_t> out, uint32_t ede) {
    const Query& q = parsed.query;
    Header h;
    h.id = q.header.id;
    // RFC 1035 §4.1.1 copies ID, opcode and RD. RA and CD (RFC 4035 §3.2.2) belong to standard
    // queries: for an opcode we do not implement their meaning is not ours to claim (RFC 6895
    // §2 defines header bits per opcode), so its NOTIMP carries neither.
    const uint16_t opcode = q.header.flags & flag::OpcodeMask;
    const uint16_t query_bits =
        opcode == 0 ? static_cast<uint16_t>(flag::RA | (q.header.flags & flag::CD)) : 0;
    h.flags = static_cast<uint16_t>(flag::QR | opcode | (q.header.flags & flag::RD) | query_bits |
                                    (extended_rcode & flag::RcodeMask));
    size_t n = kHeaderSize;
    if (parsed.question_valid) {
        h.qdcount = 1;
        std::memcpy(out.data() + n, q.question.data(), q.question.size());
        n += q.question.size();
    }
    // The OPT goes back only when the client's own was well formed (RFC 6891 §7): parsing
    // reached the end (verdict Ok, NotImp after a full parse, or BadVers), or an answer
    // written before the records were read found it by peek_query_edns.
    if (q.edns.present && parsed.verdict != QueryVerdict::FormErr) {
        h.arcount = 1;
        const bool with_ede = ede != kNoEde;
        write_opt_record(out.data() + n, server_udp_size, q.edns.do_bit, extended_rcode,
                         with_ede ? kEdeOptionSize : 0);
        n += kOptRecordSize;
        if (with_ede) {
            write_ede_option(out.data() + n, static_cast<uint16_t>(ede));
            n += kEdeOptionSize;
        }
    }
    write_header(out.data(), h);
    return n;
}

}  // namespace nscache::dns
