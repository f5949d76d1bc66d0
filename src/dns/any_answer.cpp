// SPDX-License-Identifier: BSD-3-Clause
#include "dns/any_answer.h"

#include <cstring>
#include <vector>

#include "dns/name.h"
#include "dns/response.h"

namespace nscache::dns {
namespace {

constexpr uint16_t kClassAny = 255;
constexpr uint8_t kHinfoRdata[kAnyAnswerRdataSize] = {7, 'R', 'F', 'C', '8', '4', '8', '2', 0};

constexpr uint16_t kRrsig = 46;

// Header, question, the answer records as given (their owners point at the question), OPT.
// Every ANY answer is written here: synthesised HINFO, A/AAAA gathered from the parts, or the
// empty answer with TC=1 (RFC 6891 §7) for one that did not fit.
size_t write_any_message(const Query& q, uint16_t flags, uint16_t ancount,
                         std::span<const uint8_t> records, uint16_t server_udp_size, uint8_t* p) {
    Header h;
    h.id = q.header.id;
    h.flags = flags;
    h.qdcount = 1;
    h.ancount = ancount;
    h.arcount = q.edns.present ? 1 : 0;
    write_header(p, h);
    size_t n = kHeaderSize;
    std::memcpy(p + n, q.question.data(), q.question.size());
    n += q.question.size();
    if (!records.empty()) std::memcpy(p + n, records.data(), records.size());
    n += records.size();
    if (q.edns.present) {
        write_opt_record(p + n, server_udp_size, q.edns.do_bit, 0);
        n += kOptRecordSize;
    }
    return n;
}

uint16_t answer_flags(const Query& q) {
    return static_cast<uint16_t>(flag::QR | flag::RA | (q.header.flags & (flag::RD | flag::CD)));
}

// One of the RRsets an ANY answer carries: A, AAAA, or a signature over one of them.
bool wanted(Bytes msg, const ScannedRecord& r) {
    if (r.section != Section::Answer || r.rclass != kClassIN) return false;
    if (r.type == rtype::A || r.type == rtype::AAAA) return true;
    if (r.type != kRrsig || read_u16(&msg[r.ttl_offset + 4]) < 2) return false;
    const uint16_t covered = read_u16(&msg[r.ttl_offset + 6]);
    return covered == rtype::A || covered == rtype::AAAA;
}

}  // namespace

size_t write_any_from_parts(const Query& q, std::span<const Bytes> parts, uint16_t server_udp_size,
                            size_t max_size, std::span<uint8_t> out, bool* truncated) {
    *truncated = false;
    NameBuffer qname;
    lower_name(q.qname, qname);
    std::vector<uint8_t> records;  // owner pointer to the question, then the record's fields
    uint16_t count = 0;
    bool failed = false;
    bool answered = false;
    bool ad = true;
    for (const Bytes part : parts) {
        ScannedResponse scan;
        if (part.empty() || !scan_response(part, scan)) {
            failed = true;
            continue;
        }
        const uint8_t rcode = scan.header.rcode();
        if (rcode == static_cast<uint8_t>(Rcode::NxDomain)) {
            if (part.size() > max_size) {
                *truncated = true;
                const uint16_t flags =
                    static_cast<uint16_t>(scan.header.flags & ~flag::RcodeMask) | rcode;
                return write_any_message(q, static_cast<uint16_t>(flags | flag::TC), 0, {},
                                         server_udp_size, out.data());
            }
            std::memcpy(out.data(), part.data(), part.size());
            return part.size();
        }
        if (rcode != static_cast<uint8_t>(Rcode::NoError)) {
            failed = true;
            continue;
        }
        answered = true;
        bool contributed = false;
        for (const ScannedRecord& r : scan.records) {
            if (!wanted(part, r)) continue;
            NameBuffer owner;
            if (!read_name_lower(part, r.owner_offset, owner) ||
                !names_equal_ci(owner.view(), qname.view())) {
                continue;  // a CNAME's target: not an RRset of this name
            }
            const size_t rdlength = read_u16(&part[r.ttl_offset + 4]);
            const size_t at = records.size();
            records.resize(at + 12 + rdlength);
            write_u16(&records[at], 0xC000 | kHeaderSize);
            std::memcpy(&records[at + 2], &part[r.ttl_offset - 4], 10 + rdlength);
            ++count;
            contributed = true;
        }
        if (contributed && !scan.header.has(flag::AD)) ad = false;
    }
    if (count == 0) {
        if (failed || !answered) return 0;
        return write_any_answer(q, server_udp_size, out);
    }

    uint16_t flags = answer_flags(q);
    if (ad) flags |= flag::AD;  // the parts carry AD only where the client may see it
    const size_t total =
        kHeaderSize + q.question.size() + records.size() + (q.edns.present ? kOptRecordSize : 0);
    if (total > max_size) {
        *truncated = true;
        return write_any_message(q, static_cast<uint16_t>(flags | flag::TC), 0, {}, server_udp_size,
                                 out.data());
    }
    return write_any_message(q, flags, count, records, server_udp_size, out.data());
}

size_t write_any_answer(const Query& q, uint16_t server_udp_size, std::span<uint8_t> out) {
    uint8_t record[12 + kAnyAnswerRdataSize];
    write_u16(record, 0xC000 | kHeaderSize);  // owner: the question's name
    write_u16(record + 2, rtype::HINFO);
    write_u16(record + 4, q.qclass == kClassAny ? kClassIN : q.qclass);
    write_u32(record + 6, kAnyAnswerTtl);
    write_u16(record + 10, kAnyAnswerRdataSize);
    std::memcpy(record + 12, kHinfoRdata, kAnyAnswerRdataSize);
    return write_any_message(q, answer_flags(q), 1, record, server_udp_size, out.data());
}

}  // namespace nscache::dns
