// SPDX-License-Identifier: BSD-3-Clause
#include "cache/render.h"

#include "common/bytes.h"
#include "dns/ede.h"

#include <cstring>

namespace nscache::cache {
namespace {

using dns::flag::AD;
using dns::flag::CD;
using dns::flag::QR;
using dns::flag::RA;
using dns::flag::RD;
using dns::flag::TC;

// The answer's flags: ours (QR, RA), the client's (RD, CD, opcode 0), the upstream's RCODE.
// AD goes back only to a client that showed it understands it (RFC 6840 §5.7-5.8).
uint16_t answer_flags(const AnswerView& a, const dns::Query& q) {
    uint16_t flags = QR | RA | (q.header.flags & (RD | CD)) | a.rcode;
    if (a.ad && (q.header.has(AD) || q.edns.do_bit)) flags |= AD;
    if (a.aa) flags |= dns::flag::AA;
    return flags;
}

size_t write_truncated(const dns::Query& q, const RenderLimits& limits, uint16_t flags,
                       uint8_t* out) {
    dns::Header h;
    h.id = q.header.id;
    h.flags = flags | TC;
    h.qdcount = 1;
    h.arcount = q.edns.present ? 1 : 0;
    dns::write_header(out, h);
    size_t n = dns::kHeaderSize;
    std::memcpy(out + n, q.question.data(), q.question.size());
    n += q.question.size();
    if (q.edns.present) {
        dns::write_opt_record(out + n, limits.server_udp_size, q.edns.do_bit, 0);
        n += dns::kOptRecordSize;
    }
    return n;
}

}  // namespace

size_t render_answer(const AnswerView& answer, const dns::Query& query, uint32_t age_s, bool stale,
                     const RenderLimits& limits, std::span<uint8_t> out, bool* truncated) {
    const uint16_t flags = answer_flags(answer, query);
    // EDNS options for a client that sent EDNS: the upstream's own EDEs, and ours for a stale
    // answer (RFC 8914 §4.4, code 3).
    const size_t options =
        query.edns.present ? answer.ede.size() + (stale ? dns::kEdeOptionSize : 0) : 0;
    const size_t opt_size = query.edns.present ? dns::kOptRecordSize + options : 0;
    const size_t total =
        dns::kHeaderSize + query.question.size() + answer.records.size() + opt_size;
    *truncated = total > limits.max_size;
    if (*truncated) return write_truncated(query, limits, flags, out.data());

    uint8_t* p = out.data();
    dns::Header h;
    h.id = query.header.id;
    h.flags = flags;
    h.qdcount = 1;
    h.ancount = answer.ancount;
    h.nscount = answer.nscount;
    h.arcount = static_cast<uint16_t>(answer.arcount + (query.edns.present ? 1 : 0));
    dns::write_header(p, h);
    size_t n = dns::kHeaderSize;
    std::memcpy(p + n, query.question.data(), query.question.size());
    n += query.question.size();

    uint8_t* records = p + n;
    copy_bytes(records, answer.records.data(), answer.records.size());
    for (const uint16_t offset : answer.ttl_offsets) {
        const uint32_t stored = dns::read_u32(answer.records.data() + offset);
        const uint32_t ttl = stale ? kStaleAnswerTtl : (stored > age_s ? stored - age_s : 0);
        dns::write_u32(records + offset, ttl);
    }
    n += answer.records.size();
    if (query.edns.present) {
        dns::write_opt_record(p + n, limits.server_udp_size, query.edns.do_bit, 0,
                              static_cast<uint16_t>(options));
        n += dns::kOptRecordSize;
        copy_bytes(p + n, answer.ede.data(), answer.ede.size());
        n += answer.ede.size();
        if (stale) {
            dns::write_ede_option(p + n, dns::ede::StaleAnswer);
            n += dns::kEdeOptionSize;
        }
    }
    return n;
}

}  // namespace nscache::cache
