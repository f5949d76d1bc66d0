#include "dns/query.h"

#include <cstring>

#include "dns/name.h"
#include "dns/record.h"

namespace nscache::dns {
namespace {

constexpr uint16_t kServerUdpSize = 1232;

bool is_transfer_or_mailbox(uint16_t qtype) {
    return qtype == rtype::AXFR || qtype == rtype::IXFR || qtype == rtype::MAILA ||
           qtype == rtype::MAILB;
}

// Walks the answer, authority and additional sections; records the OPT in `edns`.
QueryVerdict parse_sections(Bytes msg, size_t offset, const Header& h, Edns& edns) {
    const size_t records = size_t{h.ancount} + h.nscount + h.arcount;
    const size_t first_additional = size_t{h.ancount} + h.nscount;
    for (size_t i = 0; i < records; ++i) {
        auto rr = read_record(msg, offset);
        if (!rr) return QueryVerdict::FormErr;
        if (rr->type == rtype::OPT) {
            // RFC 6891 §6.1.1: only in the additional section, at most once, owner is root.
            if (i < first_additional || edns.present || msg[rr->owner_offset] != 0) {
                return QueryVerdict::FormErr;
            }
            edns.present = true;
            edns.udp_size = rr->rclass < kMinUdpPayload ? kMinUdpPayload : rr->rclass;
            edns.version = static_cast<uint8_t>(rr->ttl >> 16);
            edns.do_bit = (rr->ttl & kEdnsDoBit) != 0;
        }
        offset = rr->end;
    }
    return edns.version > 0 ? QueryVerdict::BadVers : QueryVerdict::Ok;
}

}  // namespace

ParsedQuery parse_query(Bytes msg) {
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
    parsed.verdict = parse_sections(msg, name->end + 4, q.header, q.edns);
    if (parsed.verdict == QueryVerdict::Ok && is_transfer_or_mailbox(q.qtype)) {
        parsed.verdict = QueryVerdict::NotImp;
    }
    return parsed;
}

void write_opt_record(uint8_t* out, uint16_t udp_size, bool do_bit, uint16_t extended_rcode) {
    out[0] = 0;  // root owner
    write_u16(out + 1, rtype::OPT);
    write_u16(out + 3, udp_size);
    const uint32_t ttl =
        uint32_t{static_cast<uint8_t>(extended_rcode >> 4)} << 24 | (do_bit ? kEdnsDoBit : 0);
    write_u32(out + 5, ttl);
    write_u16(out + 9, 0);
}

size_t write_error_answer(const ParsedQuery& parsed, uint16_t extended_rcode,
                          std::span<uint8_t> out) {
    const Query& q = parsed.query;
    Header h;
    h.id = q.header.id;
    h.flags = static_cast<uint16_t>(flag::QR |
                                    (q.header.flags & (flag::OpcodeMask | flag::RD | flag::CD)) |
                                    flag::RA | (extended_rcode & flag::RcodeMask));
    size_t n = kHeaderSize;
    if (parsed.question_valid) {
        h.qdcount = 1;
        std::memcpy(out.data() + n, q.question.data(), q.question.size());
        n += q.question.size();
    }
    // The OPT goes back only when the client's own was well formed (RFC 6891 §7), which is
    // when parsing reached the end: verdict Ok, NotImp after a full parse, or BadVers.
    if (q.edns.present && parsed.verdict != QueryVerdict::FormErr) {
        h.arcount = 1;
        write_opt_record(out.data() + n, kServerUdpSize, q.edns.do_bit, extended_rcode);
        n += kOptRecordSize;
    }
    write_header(out.data(), h);
    return n;
}

}  // namespace nscache::dns
