// SPDX-License-Identifier: BSD-3-Clause
#include "cache/nxdomain_cut.h"

#include <cstring>
#include <vector>

#include "dns/name.h"
#include "dns/response.h"

namespace nscache::cache {

std::optional<PreparedAnswer> nxdomain_marker(dns::Bytes lower_name, const PreparedAnswer& answer) {
    if (answer.rcode != static_cast<uint8_t>(dns::Rcode::NxDomain) || answer.ancount != 0 ||
        answer.kind != AnswerKind::Negative || answer.ttl == 0) {
        return std::nullopt;
    }
    // The answer as its upstream sent it, so that its compression pointers resolve: header,
    // the question (the same length as the one asked), the records.
    std::vector<uint8_t> msg(dns::kHeaderSize);
    dns::Header h;
    h.flags = dns::flag::QR | answer.rcode;
    h.qdcount = 1;
    h.nscount = answer.nscount;
    h.arcount = answer.arcount;
    dns::write_header(msg.data(), h);
    msg.insert(msg.end(), lower_name.begin(), lower_name.end());
    msg.insert(msg.end(), {0, 1, 0, 1});
    msg.insert(msg.end(), answer.records.begin(), answer.records.end());
    dns::ScannedResponse scan;
    if (!dns::scan_response(msg, scan)) return std::nullopt;

    PreparedAnswer marker;
    marker.kind = AnswerKind::Negative;
    marker.rcode = answer.rcode;
    marker.ad = answer.ad;
    marker.ttl = answer.ttl;
    for (const dns::ScannedRecord& r : scan.records) {
        if (r.section != dns::Section::Authority || r.type != dns::rtype::SOA) continue;
        dns::NameBuffer owner, mname, rname;
        const size_t rdata = r.ttl_offset + 6;
        if (!dns::read_name_lower(msg, r.owner_offset, owner)) return std::nullopt;
        const auto after_mname = dns::read_name(msg, rdata, mname);
        if (!after_mname) return std::nullopt;
        const auto after_rname = dns::read_name(msg, *after_mname, rname);
        if (!after_rname || *after_rname + 20 > msg.size()) return std::nullopt;
        std::vector<uint8_t>& out = marker.records;
        out.insert(out.end(), owner.bytes, owner.bytes + owner.length);
        const size_t fixed = out.size();
        out.resize(fixed + 10);
        std::memcpy(&out[fixed], &msg[r.ttl_offset - 4], 8);  // type, class, TTL
        dns::write_u16(&out[fixed + 8], static_cast<uint16_t>(mname.length + rname.length + 20));
        marker.ttl_offsets.push_back(static_cast<uint16_t>(fixed + 4));
        out.insert(out.end(), mname.bytes, mname.bytes + mname.length);
        out.insert(out.end(), rname.bytes, rname.bytes + rname.length);
        out.insert(out.end(), msg.begin() + static_cast<ptrdiff_t>(*after_rname),
                   msg.begin() + static_cast<ptrdiff_t>(*after_rname + 20));
        marker.nscount = 1;
        break;  // one SOA is what RFC 2308 §3 asks for
    }
    return marker;
}

}  // namespace nscache::cache
