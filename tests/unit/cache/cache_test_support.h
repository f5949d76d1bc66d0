// SPDX-License-Identifier: BSD-3-Clause
// Test helper: upstream answers for cache tests and the queries that ask for them.
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>

#include "cache/answer.h"
#include "dns/name.h"
#include "dns/query.h"
#include "dns/response.h"
#include "wire_builder.h"

namespace nscache::cache::testing {

using nscache::testing::WireBuilder;

// An answer with one A record per TTL, compressed against the question, plus an OPT.
inline WireBuilder positive_answer(std::string_view qname, std::initializer_list<uint32_t> ttls,
                                   uint16_t id = 1) {
    WireBuilder b;
    b.header(id, dns::flag::QR | dns::flag::RD | dns::flag::RA, 1,
             static_cast<uint16_t>(ttls.size()), 0, 1)
        .question(qname, dns::rtype::A);
    uint8_t last = 1;
    for (uint32_t ttl : ttls) {
        b.name_then_pointer("", 12).rr_fixed(dns::rtype::A, ttl, 4).raw({192, 0, 2, last++});
    }
    b.opt(1232);
    return b;
}

// NXDOMAIN or NODATA (NOERROR, no answers) with an SOA in the authority section.
inline WireBuilder negative_answer(std::string_view qname, dns::Rcode rcode, uint32_t soa_ttl,
                                   uint32_t soa_minimum) {
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA | static_cast<uint16_t>(rcode), 1, 0,
             1, 0)
        .question(qname, dns::rtype::A);
    b.name("example.test").rr_fixed(dns::rtype::SOA, soa_ttl, 0);
    const size_t rdlen_at = b.size() - 2;
    const size_t start = b.size();
    b.name("ns.example.test").name("admin.example.test");
    b.u32(2024010101).u32(3600).u32(600).u32(86400).u32(soa_minimum);
    dns::write_u16(&b.bytes[rdlen_at], static_cast<uint16_t>(b.size() - start));
    return b;
}

inline WireBuilder empty_answer(std::string_view qname, dns::Rcode rcode) {
    WireBuilder b;
    b.header(1, dns::flag::QR | dns::flag::RD | dns::flag::RA | static_cast<uint16_t>(rcode), 1)
        .question(qname, dns::rtype::A);
    return b;
}

inline std::optional<PreparedAnswer> prepare(const WireBuilder& msg, const TtlPolicy& policy) {
    dns::ScannedResponse scan;
    if (!dns::scan_response(msg.view(), scan)) return std::nullopt;
    return prepare_answer(msg.view(), scan, policy);
}

// A client query, kept alive with the bytes its spans point into.
struct ClientQuery {
    WireBuilder wire;
    dns::ParsedQuery parsed;
    dns::NameBuffer lower;

    ClientQuery(std::string_view qname, uint16_t qtype, uint16_t id = 0x5555,
                std::optional<uint16_t> edns_size = std::nullopt) {
        wire.header(id, dns::flag::RD, 1, 0, 0, edns_size ? 1 : 0).question(qname, qtype);
        if (edns_size) wire.opt(*edns_size);
        parsed = dns::parse_query(wire.view());
        dns::lower_name(parsed.query.qname, lower);
    }
    ClientQuery(const ClientQuery&) = delete;
    ClientQuery& operator=(const ClientQuery&) = delete;
    const dns::Query& query() const { return parsed.query; }
};

}  // namespace nscache::cache::testing
