// Socket addresses and CIDR prefixes as the config and CLI write them:
// "127.0.0.1:53", "[::1]:53", "192.0.2.1" (default port), "10.0.0.0/8", "::1/128".
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace nscache {

struct SocketAddress {
    sockaddr_storage storage{};
    socklen_t length = 0;

    int family() const { return storage.ss_family; }
    uint16_t port() const;
    void set_port(uint16_t port);
    const sockaddr* sa() const { return reinterpret_cast<const sockaddr*>(&storage); }
    sockaddr* sa() { return reinterpret_cast<sockaddr*>(&storage); }
    // "127.0.0.1:53" or "[::1]:53".
    std::string to_string() const;
    // Same address and port.
    bool operator==(const SocketAddress& other) const;
    bool is_loopback() const;

    static SocketAddress from_sockaddr(const sockaddr* sa, socklen_t len);
};

// Parses "ADDR:PORT" or "[ADDR6]:PORT"; when `default_port` is set, the port may be left out
// ("ADDR" or "[ADDR6]", or a bare IPv6 address).
std::optional<SocketAddress> parse_socket_address(std::string_view text,
                                                  std::optional<uint16_t> default_port);

struct Cidr {
    int family = AF_INET;
    uint8_t bytes[16] = {};
    uint8_t prefix = 0;

    bool contains(const sockaddr* sa) const;
    std::string to_string() const;
};

// "10.0.0.0/8", "::1/128"; a bare address means a single host.
std::optional<Cidr> parse_cidr(std::string_view text);

}  // namespace nscache
