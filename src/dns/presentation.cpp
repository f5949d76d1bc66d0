// SPDX-License-Identifier: BSD-3-Clause
#include "dns/presentation.h"

#include <arpa/inet.h>

#include <array>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <utility>

#include "dns/name.h"
#include "dns/record.h"

namespace nscache::dns {
namespace {

constexpr std::pair<uint16_t, const char*> kTypes[] = {
    {1, "A"},      {2, "NS"},      {5, "CNAME"},  {6, "SOA"},   {12, "PTR"},
    {13, "HINFO"}, {15, "MX"},     {16, "TXT"},   {28, "AAAA"}, {33, "SRV"},
    {35, "NAPTR"}, {39, "DNAME"},  {41, "OPT"},   {43, "DS"},   {46, "RRSIG"},
    {47, "NSEC"},  {48, "DNSKEY"}, {50, "NSEC3"}, {52, "TLSA"}, {64, "SVCB"},
    {65, "HTTPS"}, {99, "SPF"},    {252, "AXFR"}, {255, "ANY"}, {257, "CAA"},
};

std::string upper(std::string_view text) {
    std::string out(text);
    for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
    return out;
}

std::string name_at(Bytes msg, size_t offset, size_t* end = nullptr) {
    NameBuffer name;
    auto after = read_name(msg, offset, name);
    if (!after) return "<bad name>";
    if (end != nullptr) *end = *after;
    return name_to_text(name.view());
}

std::string hex(Bytes data) {
    std::string out;
    char buf[3];
    for (uint8_t b : data) {
        std::snprintf(buf, sizeof buf, "%02X", b);
        out += buf;
    }
    return out;
}

std::string character_strings(Bytes data) {
    std::string out;
    size_t pos = 0;
    while (pos < data.size()) {
        const size_t len = data[pos++];
        if (pos + len > data.size()) return "<bad text>";
        if (!out.empty()) out += ' ';
        out += '"';
        for (size_t i = 0; i < len; ++i) {
            const uint8_t c = data[pos + i];
            if (c == '"' || c == '\\') {
                out += '\\';
                out += static_cast<char>(c);
            } else if (c < 0x20 || c >= 0x7F) {
                char buf[5];
                std::snprintf(buf, sizeof buf, "\\%03u", c);
                out += buf;
            } else {
                out += static_cast<char>(c);
            }
        }
        out += '"';
        pos += len;
    }
    return out;
}

std::string rdata_to_text(Bytes msg, const RecordView& rr) {
    const Bytes rdata = msg.subspan(rr.rdata_offset, rr.rdlength);
    char buf[INET6_ADDRSTRLEN];
    switch (rr.type) {
        case rtype::A:
            if (rdata.size() != 4) break;
            return inet_ntop(AF_INET, rdata.data(), buf, sizeof buf);
        case rtype::AAAA:
            if (rdata.size() != 16) break;
            return inet_ntop(AF_INET6, rdata.data(), buf, sizeof buf);
        case rtype::NS:
        case rtype::CNAME:
        case rtype::PTR:
        case rtype::DNAME:
            if (!rdata_is_well_formed(msg, rr)) break;
            return name_at(msg, rr.rdata_offset);
        case rtype::MX:
            if (!rdata_is_well_formed(msg, rr)) break;
            return std::to_string(read_u16(rdata.data())) + " " + name_at(msg, rr.rdata_offset + 2);
        case rtype::SOA: {
            if (!rdata_is_well_formed(msg, rr)) break;
            size_t after_mname = 0;
            size_t after_rname = 0;
            // Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict for
            // `" " + string`.
            std::string text = name_at(msg, rr.rdata_offset, &after_mname);
            text += ' ';
            text += name_at(msg, after_mname, &after_rname);
            for (int i = 0; i < 5; ++i) {
                text += ' ';
                text += std::to_string(read_u32(&msg[after_rname + 4 * i]));
            }
            return text;
        }
        case rtype::TXT:
            return character_strings(rdata);
        case rtype::SRV:
            if (rdata.size() < 7) break;
            {
                std::string text = std::to_string(read_u16(rdata.data()));
                for (size_t at : {size_t{2}, size_t{4}}) {
                    text += ' ';
                    text += std::to_string(read_u16(rdata.data() + at));
                }
                text += ' ';
                text += name_at(msg, rr.rdata_offset + 6);
                return text;
            }
        default:
            break;
    }
    // RFC 3597 §5: the generic form for anything else.
    std::string text = "\\# ";
    text += std::to_string(rdata.size());
    if (!rdata.empty()) {
        text += ' ';
        text += hex(rdata);
    }
    return text;
}

}  // namespace

std::optional<uint16_t> type_from_text(std::string_view text) {
    const std::string u = upper(text);
    for (const auto& [value, name] : kTypes) {
        if (u == name) return value;
    }
    if (u.rfind("TYPE", 0) == 0) {
        unsigned value = 0;
        auto [end, ec] = std::from_chars(u.data() + 4, u.data() + u.size(), value);
        if (ec == std::errc() && end == u.data() + u.size() && value <= 65535 && u.size() > 4) {
            return static_cast<uint16_t>(value);
        }
    }
    return std::nullopt;
}

std::string type_to_text(uint16_t type) {
    for (const auto& [value, name] : kTypes) {
        if (value == type) return name;
    }
    return "TYPE" + std::to_string(type);
}

std::string class_to_text(uint16_t rclass) {
    switch (rclass) {
        case 1:
            return "IN";
        case 3:
            return "CH";
        case 4:
            return "HS";
        case 255:
            return "ANY";
        default:
            return "CLASS" + std::to_string(rclass);
    }
}

std::string rcode_to_text(uint16_t rcode) {
    static constexpr const char* kNames[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
                                             "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
                                             "NXRRSET", "NOTAUTH", "NOTZONE"};
    if (rcode < std::size(kNames)) return kNames[rcode];
    if (rcode == kRcodeBadVers) return "BADVERS";
    return "RCODE" + std::to_string(rcode);
}

std::string message_to_text(Bytes msg) {
    if (msg.size() < kHeaderSize) return ";; message too short\n";
    const Header h = read_header(msg);
    std::string out = ";; ->>HEADER<<- opcode: " + std::to_string(h.opcode()) +
                      ", status: " + rcode_to_text(h.rcode()) + ", id: " + std::to_string(h.id) +
                      "\n";
    out += ";; flags:";
    constexpr std::pair<uint16_t, const char*> kFlags[] = {
        {flag::QR, "qr"}, {flag::AA, "aa"}, {flag::TC, "tc"}, {flag::RD, "rd"},
        {flag::RA, "ra"}, {flag::AD, "ad"}, {flag::CD, "cd"}};
    for (const auto& [bit, name] : kFlags) {
        if (h.has(bit)) out += std::string(" ") + name;
    }
    out += "; QUERY: " + std::to_string(h.qdcount) + ", ANSWER: " + std::to_string(h.ancount) +
           ", AUTHORITY: " + std::to_string(h.nscount) +
           ", ADDITIONAL: " + std::to_string(h.arcount) + "\n";
    size_t offset = kHeaderSize;
    if (h.qdcount > 0) out += "\n;; QUESTION SECTION:\n";
    for (uint16_t i = 0; i < h.qdcount; ++i) {
        auto name = skip_name(msg, offset);
        if (!name || name->end + 4 > msg.size()) return out + ";; malformed question\n";
        out += ';';
        out += name_at(msg, offset);
        out += "\t\t";
        out += class_to_text(read_u16(&msg[name->end + 2]));
        out += '\t';
        out += type_to_text(read_u16(&msg[name->end]));
        out += '\n';
        offset = name->end + 4;
    }
    const char* titles[] = {"ANSWER", "AUTHORITY", "ADDITIONAL"};
    const uint16_t counts[] = {h.ancount, h.nscount, h.arcount};
    for (int s = 0; s < 3; ++s) {
        if (counts[s] == 0) continue;
        out += std::string("\n;; ") + titles[s] + " SECTION:\n";
        for (uint16_t i = 0; i < counts[s]; ++i) {
            auto rr = read_record(msg, offset);
            if (!rr) return out + ";; malformed record\n";
            if (rr->type == rtype::OPT) {
                out += ";; OPT: udp " + std::to_string(rr->rclass) +
                       ((rr->ttl & kEdnsDoBit) ? ", do" : "") + "\n";
            } else {
                out += name_at(msg, rr->owner_offset) + "\t" + std::to_string(rr->ttl) + "\t" +
                       class_to_text(rr->rclass) + "\t" + type_to_text(rr->type) + "\t" +
                       rdata_to_text(msg, *rr) + "\n";
            }
            offset = rr->end;
        }
    }
    return out;
}

}  // namespace nscache::dns
