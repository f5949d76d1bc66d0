// SPDX-License-Identifier: BSD-3-Clause
#include "config/address.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace nscache {
namespace {

std::optional<uint16_t> parse_port(std::string_view text) {
    unsigned value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty() || value > 65535) {
        return std::nullopt;
    }
    return static_cast<uint16_t>(value);
}

// An IPv4-mapped IPv6 peer (::ffff:a.b.c.d) is matched as the IPv4 address it carries.
const uint8_t* address_bytes(const sockaddr* sa, int& family) {
    family = sa->sa_family;
    if (family == AF_INET) {
        return reinterpret_cast<const uint8_t*>(
            &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
    }
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(sa);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
        family = AF_INET;
        return in6->sin6_addr.s6_addr + 12;
    }
    return in6->sin6_addr.s6_addr;
}

}  // namespace

uint16_t SocketAddress::port() const {
    if (family() == AF_INET) return ntohs(reinterpret_cast<const sockaddr_in*>(&storage)->sin_port);
    return ntohs(reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_port);
}

void SocketAddress::set_port(uint16_t port) {
    if (family() == AF_INET) {
        reinterpret_cast<sockaddr_in*>(&storage)->sin_port = htons(port);
    } else {
        reinterpret_cast<sockaddr_in6*>(&storage)->sin6_port = htons(port);
    }
}

std::string SocketAddress::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    if (family() == AF_INET) {
        inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr, buf,
                  sizeof buf);
        return std::string(buf) + ":" + std::to_string(port());
    }
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr, buf,
              sizeof buf);
    // Appended piece by piece: g++ 12 at -O3 reports a false -Wrestrict for "[" + string.
    std::string text = "[";
    text += buf;
    text += "]:";
    text += std::to_string(port());
    return text;
}

bool SocketAddress::operator==(const SocketAddress& other) const {
    if (family() != other.family() || port() != other.port()) return false;
    if (family() == AF_INET) {
        return std::memcmp(&reinterpret_cast<const sockaddr_in*>(&storage)->sin_addr,
                           &reinterpret_cast<const sockaddr_in*>(&other.storage)->sin_addr, 4) == 0;
    }
    return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&storage)->sin6_addr,
                       &reinterpret_cast<const sockaddr_in6*>(&other.storage)->sin6_addr, 16) == 0;
}

bool SocketAddress::is_loopback() const {
    int family = 0;
    const uint8_t* bytes = address_bytes(sa(), family);
    if (family == AF_INET) return bytes[0] == 127;
    return IN6_IS_ADDR_LOOPBACK(reinterpret_cast<const in6_addr*>(bytes));
}

SocketAddress SocketAddress::from_sockaddr(const sockaddr* sa, socklen_t len) {
    SocketAddress a;
    if (len > sizeof a.storage) len = sizeof a.storage;
    std::memcpy(&a.storage, sa, len);
    a.length = len;
    return a;
}

std::optional<SocketAddress> parse_socket_address(std::string_view text,
                                                  std::optional<uint16_t> default_port) {
    std::string host;
    std::optional<uint16_t> port = default_port;
    if (!text.empty() && text.front() == '[') {
        const size_t close = text.find(']');
        if (close == std::string_view::npos) return std::nullopt;
        host = std::string(text.substr(1, close - 1));
        std::string_view rest = text.substr(close + 1);
        if (!rest.empty()) {
            if (rest.front() != ':') return std::nullopt;
            port = parse_port(rest.substr(1));
            if (!port) return std::nullopt;
        }
    } else {
        const size_t colon = text.find(':');
        if (colon != std::string_view::npos &&
            text.find(':', colon + 1) != std::string_view::npos) {
            host = std::string(text);  // bare IPv6, no port
        } else if (colon != std::string_view::npos) {
            host = std::string(text.substr(0, colon));
            port = parse_port(text.substr(colon + 1));
            if (!port) return std::nullopt;
        } else {
            host = std::string(text);
        }
    }
    if (!port) return std::nullopt;
    SocketAddress a;
    auto* in4 = reinterpret_cast<sockaddr_in*>(&a.storage);
    auto* in6 = reinterpret_cast<sockaddr_in6*>(&a.storage);
    if (inet_pton(AF_INET, host.c_str(), &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons(*port);
        a.length = sizeof(sockaddr_in);
        return a;
    }
    if (inet_pton(AF_INET6, host.c_str(), &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons(*port);
        a.length = sizeof(sockaddr_in6);
        return a;
    }
    return std::nullopt;
}

bool Cidr::contains(const sockaddr* sa) const {
    int peer_family = 0;
    const uint8_t* peer = address_bytes(sa, peer_family);
    if (peer_family != family) return false;
    const int full = prefix / 8;
    if (std::memcmp(peer, bytes, static_cast<size_t>(full)) != 0) return false;
    const int rest = prefix % 8;
    if (rest == 0) return true;
    const uint8_t mask = static_cast<uint8_t>(0xFF << (8 - rest));
    return (peer[full] & mask) == (bytes[full] & mask);
}

std::string Cidr::to_string() const {
    char buf[INET6_ADDRSTRLEN] = {};
    inet_ntop(family, bytes, buf, sizeof buf);
    return std::string(buf) + "/" + std::to_string(prefix);
}

std::optional<Cidr> parse_cidr(std::string_view text) {
    Cidr c;
    std::string host(text);
    std::optional<unsigned> prefix;
    if (const size_t slash = text.find('/'); slash != std::string_view::npos) {
        host = std::string(text.substr(0, slash));
        auto p = parse_port(text.substr(slash + 1));  // a small unsigned number
        if (!p) return std::nullopt;
        prefix = *p;
    }
    if (inet_pton(AF_INET, host.c_str(), c.bytes) == 1) {
        c.family = AF_INET;
        c.prefix = static_cast<uint8_t>(prefix.value_or(32));
        if (prefix.value_or(32) > 32) return std::nullopt;
        return c;
    }
    if (inet_pton(AF_INET6, host.c_str(), c.bytes) == 1) {
        c.family = AF_INET6;
        if (prefix.value_or(128) > 128) return std::nullopt;
        c.prefix = static_cast<uint8_t>(prefix.value_or(128));
        return c;
    }
    return std::nullopt;
}

std::string UpstreamAddress::to_string() const {
    const std::string name = auth_name.empty() ? "" : "#" + auth_name;
    if (https) return "https://" + address.to_string() + path + name;
    if (!tls) return address.to_string();
    return "tls://" + address.to_string() + name;
}

namespace {

// A host name: letters, digits, hyphens and dots only.
bool valid_auth_name(std::string_view name) {
    if (name.empty() || name.size() > 253) return false;
    for (char c : name) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '.';
        if (!ok) return false;
    }
    return true;
}

// RFC 3986 path characters (unreserved, sub-delims, ':' '@' '/' and %-escapes); no query or
// fragment: DoH over POST sends the message as the body (RFC 8484 §4.1), so the path is all.
bool valid_path(std::string_view path) {
    if (path.empty() || path.front() != '/' || path.size() > 256) return false;
    constexpr std::string_view kOther = "-._~!$&'()*+,;=:@/%";
    for (char c : path) {
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || kOther.find(c) != std::string_view::npos;
        if (!ok) return false;
    }
    return true;
}

// "ADDR[:PORT][#NAME]" after the scheme: the name goes into `out`, the rest is returned.
std::optional<std::string_view> split_auth_name(std::string_view text, UpstreamAddress& out) {
    if (const size_t hash = text.find('#'); hash != std::string_view::npos) {
        out.auth_name = std::string(text.substr(hash + 1));
        if (!valid_auth_name(out.auth_name)) return std::nullopt;
        text = text.substr(0, hash);
    }
    return text;
}

}  // namespace

std::optional<UpstreamAddress> parse_upstream_address(std::string_view text) {
    constexpr std::string_view kTls = "tls://";
    constexpr std::string_view kHttps = "https://";
    UpstreamAddress out;
    if (text.substr(0, kHttps.size()) == kHttps) {
        auto rest = split_auth_name(text.substr(kHttps.size()), out);
        if (!rest) return std::nullopt;
        // The path starts at the first '/' (an IPv6 address is bracketed: it has none).
        std::string_view authority = *rest;
        out.path = "/dns-query";
        if (const size_t slash = authority.find('/'); slash != std::string_view::npos) {
            out.path = std::string(authority.substr(slash));
            authority = authority.substr(0, slash);
            if (!valid_path(out.path)) return std::nullopt;
        }
        auto a = parse_socket_address(authority, 443);
        if (!a) return std::nullopt;
        out.address = *a;
        out.tls = true;
        out.https = true;
        return out;
    }
    if (text.substr(0, kTls.size()) != kTls) {
        auto a = parse_socket_address(text, 53);
        if (!a) return std::nullopt;
        out.address = *a;
        return out;
    }
    auto rest = split_auth_name(text.substr(kTls.size()), out);
    if (!rest) return std::nullopt;
    auto a = parse_socket_address(*rest, 853);
    if (!a) return std::nullopt;
    out.address = *a;
    out.tls = true;
    return out;
}

namespace {

std::optional<std::string> decode_base64(std::string_view text) {
    auto value = [](char c) -> int {
        if (c >= 'A' && c <= 'Z') return c - 'A';
        if (c >= 'a' && c <= 'z') return c - 'a' + 26;
        if (c >= '0' && c <= '9') return c - '0' + 52;
        if (c == '+') return 62;
        if (c == '/') return 63;
        return -1;
    };
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    std::string out;
    uint32_t bits = 0;
    int count = 0;
    for (char c : text) {
        const int v = value(c);
        if (v < 0) return std::nullopt;
        bits = bits << 6 | static_cast<uint32_t>(v);
        count += 6;
        if (count >= 8) {
            count -= 8;
            out.push_back(static_cast<char>((bits >> count) & 0xFF));
        }
    }
    return out;
}

}  // namespace

std::optional<SpkiPin> parse_spki_pin(std::string_view text) {
    const size_t space = text.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    auto address = parse_socket_address(text.substr(0, space), 853);
    std::string_view b64 = text.substr(space + 1);
    while (!b64.empty() && b64.front() == ' ') b64.remove_prefix(1);
    auto bytes = decode_base64(b64);
    if (!address || !bytes || bytes->size() != 32) return std::nullopt;
    return SpkiPin{*address, *bytes};
}

}  // namespace nscache
