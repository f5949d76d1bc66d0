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

}  // namespace nscache
