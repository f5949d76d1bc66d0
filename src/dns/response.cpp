// SPDX-License-Identifier: BSD-3-Clause
#include "dns/response.h"

#include <cstring>

#include "dns/name.h"
#include "dns/query.h"
#include "dns/record.h"

namespace nscache::dns {

size_t write_upstream_query(const UpstreamQuestion& q, uint16_t id, uint16_t udp_size,
                            std::span<uint8_t> out, Bytes cookie) {
    Header h;
    h.id = id;
    h.flags = static_cast<uint16_t>(flag::RD | (q.cd ? flag::CD : 0));
    h.qdcount = 1;
    h.arcount = 1;
    write_header(out.data(), h);
    size_t n = kHeaderSize;
    std::memcpy(out.data() + n, q.qname.data(), q.qname.size());
    n += q.qname.size();
    write_u16(out.data() + n, q.qtype);
    write_u16(out.data() + n + 2, q.qclass);
    n += 4;
    const bool with_cookie = !cookie.empty() && cookie.size() <= kMaxCookieOptionData;
    const size_t options = with_cookie ? 4 + cookie.size() : 0;
    write_opt_record(out.data() + n, udp_size, q.do_bit, 0, static_cast<uint16_t>(options));
    n += kOptRecordSize;
    if (!with_cookie) return n;
    constexpr uint16_t kCookieOption = 10;  // RFC 7873 §4
    write_u16(out.data() + n, kCookieOption);
    write_u16(out.data() + n + 2, static_cast<uint16_t>(cookie.size()));
    std::memcpy(out.data() + n + 4, cookie.data(), cookie.size());
    return n + options;
}

size_t pad_upstream_query(std::span<uint8_t> out, size_t length) {
    constexpr uint16_t kPaddingOption = 12;
    const size_t unpadded = length + 4;
    const size_t pad = (kPaddingBlock - unpadded % kPaddingBlock) % kPaddingBlock;
    uint8_t* option = out.data() + length;
    write_u16(option, kPaddingOption);
    write_u16(option + 2, static_cast<uint16_t>(pad));
    std::memset(option + 4, 0, pad);
    // The OPT record's RDLENGTH: the last two bytes before its (empty) RDATA.
    write_u16(out.data() + length - 2, static_cast<uint16_t>(4 + pad));
    return unpadded + pad;
}

bool answers_question(Bytes msg, uint16_t id, const UpstreamQuestion& q) {
    if (msg.size() < kHeaderSize) return false;
    const Header h = read_header(msg);
    if (h.id != id || !h.has(flag::QR) || h.opcode() != 0 || h.qdcount != 1) return false;
    const size_t name_end = kHeaderSize + q.qname.size();
    if (name_end + 4 > msg.size()) return false;
    // Our question is uncompressed and nothing precedes it, so an honest echo is too.
    if (!names_equal_ci(msg.subspan(kHeaderSize, q.qname.size()), q.qname)) return false;
    return read_u16(&msg[name_end]) == q.qtype && read_u16(&msg[name_end + 2]) == q.qclass;
}

bool scan_response(Bytes msg, ScannedResponse& out) {
    if (msg.size() < kHeaderSize) return false;
    out.header = read_header(msg);
    out.records.clear();
    out.ttl_fields.clear();
    out.has_opt = false;
    out.opt_rdata_offset = 0;
    out.opt_rdlength = 0;
    out.opt_is_last = true;
    if (out.header.qdcount != 1) return false;
    auto qname = skip_uncompressed_name(msg, kHeaderSize);
    if (!qname || qname->end + 4 > msg.size()) return false;
    out.records_offset = qname->end + 4;
    out.records_end = out.records_offset;
    out.extended_rcode = out.header.rcode();

    const Header& h = out.header;
    const size_t counts[3] = {h.ancount, h.nscount, h.arcount};
    size_t offset = out.records_offset;
    for (int s = 0; s < 3; ++s) {
        const auto section = static_cast<Section>(s);
        for (size_t i = 0; i < counts[s]; ++i) {
            // A name behind a pointer must not read a TTL: the cache rewrites those.
            auto rr = read_record(msg, offset, FrozenFields{out.ttl_fields, 4});
            if (!rr) return false;
            out.ttl_fields.push_back(rr->ttl_offset);
            if (!rdata_is_well_formed(msg, *rr, FrozenFields{out.ttl_fields, 4})) return false;
            offset = rr->end;
            if (rr->type == rtype::OPT) {
                if (section != Section::Additional || out.has_opt || msg[rr->owner_offset] != 0) {
                    return false;
                }
                out.has_opt = true;
                out.opt_rdata_offset = rr->rdata_offset;
                out.opt_rdlength = rr->rdlength;
                out.extended_rcode =
                    static_cast<uint16_t>((rr->ttl >> 24) << 4 | out.header.rcode());
                continue;
            }
            if (out.has_opt) out.opt_is_last = false;
            ScannedRecord rec{rr->ttl_offset,   rr->ttl,   rr->type, section, 0,
                              rr->owner_offset, rr->rclass};
            if (rr->type == rtype::SOA) {
                auto minimum = soa_minimum(msg, *rr);
                if (!minimum) return false;
                rec.soa_minimum = *minimum;
            }
            out.records.push_back(rec);
            out.records_end = rr->end;
        }
    }
    return true;
}

}  // namespace nscache::dns
