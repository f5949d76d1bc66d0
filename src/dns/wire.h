// SPDX-License-Identifier: BSD-3-Clause
// DNS wire-format constants and bounds-checked big-endian access (RFC 1035 §4).
// Pure functions on byte spans; every read checks its length first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace nscache::dns {

using Bytes = std::span<const uint8_t>;

inline constexpr size_t kHeaderSize = 12;
inline constexpr size_t kMaxNameLength = 255;  // wire length, root label included
inline constexpr size_t kMaxLabelLength = 63;
inline constexpr size_t kMaxUdpPayload = 65535;
inline constexpr uint16_t kMinUdpPayload = 512;  // RFC 6891 §6.2.5

namespace rtype {
inline constexpr uint16_t A = 1;
inline constexpr uint16_t NS = 2;
inline constexpr uint16_t CNAME = 5;
inline constexpr uint16_t SOA = 6;
inline constexpr uint16_t PTR = 12;
inline constexpr uint16_t HINFO = 13;
inline constexpr uint16_t MX = 15;
inline constexpr uint16_t TXT = 16;
inline constexpr uint16_t AAAA = 28;
inline constexpr uint16_t SRV = 33;
inline constexpr uint16_t DNAME = 39;
inline constexpr uint16_t OPT = 41;
inline constexpr uint16_t TSIG = 250;
inline constexpr uint16_t IXFR = 251;
inline constexpr uint16_t AXFR = 252;
inline constexpr uint16_t MAILB = 253;
inline constexpr uint16_t MAILA = 254;
inline constexpr uint16_t ANY = 255;
}  // namespace rtype

inline constexpr uint16_t kClassIN = 1;

enum class Rcode : uint8_t {
    NoError = 0,
    FormErr = 1,
    ServFail = 2,
    NxDomain = 3,
    NotImp = 4,
    Refused = 5,
};
inline constexpr uint16_t kRcodeBadVers = 16;  // extended RCODE, RFC 6891 §9

// Header flag bits within the 16-bit flags word.
namespace flag {
inline constexpr uint16_t QR = 0x8000;
inline constexpr uint16_t AA = 0x0400;
inline constexpr uint16_t TC = 0x0200;
inline constexpr uint16_t RD = 0x0100;
inline constexpr uint16_t RA = 0x0080;
inline constexpr uint16_t AD = 0x0020;
inline constexpr uint16_t CD = 0x0010;
inline constexpr uint16_t OpcodeMask = 0x7800;
inline constexpr uint16_t RcodeMask = 0x000F;
}  // namespace flag
inline constexpr uint32_t kEdnsDoBit = 0x8000;  // in the OPT TTL's low 16 bits

inline uint16_t read_u16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] << 8 | p[1]);
}
inline uint32_t read_u32(const uint8_t* p) {
    return uint32_t{p[0]} << 24 | uint32_t{p[1]} << 16 | uint32_t{p[2]} << 8 | p[3];
}
inline void write_u16(uint8_t* p, uint16_t v) {
    p[0] = static_cast<uint8_t>(v >> 8);
    p[1] = static_cast<uint8_t>(v);
}
inline void write_u32(uint8_t* p, uint32_t v) {
    p[0] = static_cast<uint8_t>(v >> 24);
    p[1] = static_cast<uint8_t>(v >> 16);
    p[2] = static_cast<uint8_t>(v >> 8);
    p[3] = static_cast<uint8_t>(v);
}

inline uint8_t ascii_lower(uint8_t c) {
    return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c;
}

// Header fields, decoded. Valid only after the caller checked size >= kHeaderSize.
struct Header {
    uint16_t id = 0;
    uint16_t flags = 0;
    uint16_t qdcount = 0;
    uint16_t ancount = 0;
    uint16_t nscount = 0;
    uint16_t arcount = 0;

    uint8_t opcode() const { return static_cast<uint8_t>((flags & flag::OpcodeMask) >> 11); }
    uint8_t rcode() const { return static_cast<uint8_t>(flags & flag::RcodeMask); }
    bool has(uint16_t bit) const { return (flags & bit) != 0; }
};

inline Header read_header(Bytes msg) {
    const uint8_t* p = msg.data();
    return Header{read_u16(p),     read_u16(p + 2), read_u16(p + 4),
                  read_u16(p + 6), read_u16(p + 8), read_u16(p + 10)};
}

inline void write_header(uint8_t* p, const Header& h) {
    write_u16(p, h.id);
    write_u16(p + 2, h.flags);
    write_u16(p + 4, h.qdcount);
    write_u16(p + 6, h.ancount);
    write_u16(p + 8, h.nscount);
    write_u16(p + 10, h.arcount);
}

}  // namespace nscache::dns
