// SPDX-License-Identifier: BSD-3-Clause
// Test helper: assembles DNS messages byte by byte, so tests can write both well-formed
// messages and exactly the malformed ones they want.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "dns/name.h"
#include "dns/wire.h"

namespace nscache::testing {

class WireBuilder {
  public:
    WireBuilder& header(uint16_t id, uint16_t flags, uint16_t qd, uint16_t an = 0, uint16_t ns = 0,
                        uint16_t ar = 0) {
        u16(id).u16(flags).u16(qd).u16(an).u16(ns).u16(ar);
        return *this;
    }
    WireBuilder& u8(uint8_t v) {
        bytes.push_back(v);
        return *this;
    }
    WireBuilder& u16(uint16_t v) {
        return u8(static_cast<uint8_t>(v >> 8)).u8(static_cast<uint8_t>(v));
    }
    WireBuilder& u32(uint32_t v) {
        return u16(static_cast<uint16_t>(v >> 16)).u16(static_cast<uint16_t>(v));
    }
    WireBuilder& raw(std::initializer_list<uint8_t> data) {
        bytes.insert(bytes.end(), data);
        return *this;
    }
    // An uncompressed name from text ("www.example.com").
    WireBuilder& name(std::string_view text) {
        auto n = dns::name_from_text(text);
        bytes.insert(bytes.end(), n->bytes, n->bytes + n->length);
        return *this;
    }
    // Labels from text, then a compression pointer to `target` instead of the root.
    WireBuilder& name_then_pointer(std::string_view labels, uint16_t target) {
        if (!labels.empty()) {
            auto n = dns::name_from_text(labels);
            bytes.insert(bytes.end(), n->bytes, n->bytes + n->length - 1);
        }
        return u16(static_cast<uint16_t>(0xC000 | target));
    }
    WireBuilder& question(std::string_view qname, uint16_t qtype, uint16_t qclass = 1) {
        return name(qname).u16(qtype).u16(qclass);
    }
    // Type, class, TTL and rdlength, after an owner the caller wrote.
    WireBuilder& rr_fixed(uint16_t type, uint32_t ttl, uint16_t rdlength, uint16_t rclass = 1) {
        return u16(type).u16(rclass).u32(ttl).u16(rdlength);
    }
    WireBuilder& opt(uint16_t udp_size, bool do_bit = false, uint8_t version = 0) {
        return u8(0)
            .u16(dns::rtype::OPT)
            .u16(udp_size)
            .u32((uint32_t{version} << 16) | (do_bit ? 0x8000u : 0u))
            .u16(0);
    }
    size_t size() const { return bytes.size(); }
    dns::Bytes view() const { return dns::Bytes(bytes.data(), bytes.size()); }

    std::vector<uint8_t> bytes;
};

}  // namespace nscache::testing
