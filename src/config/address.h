// SPDX-License-Identifier: BSD-3-Clause
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

// An upstream as the config and CLI write it: "ADDR[:PORT]" (DNS over UDP and TCP, port 53),
// "tls://ADDR[:PORT][#AUTH-NAME]" (DNS over TLS, RFC 7858, port 853; the certificate must
// name AUTH-NAME, or the address when none is given) or "https://ADDR[:PORT][/PATH][#AUTH-NAME]"
// (DNS over HTTPS, RFC 8484, port 443, path /dns-query; authenticated as tls:// is).
enum class TlsAuth {
    Strict,         // an unauthenticated TLS server is never used, nothing goes in cleartext
    Opportunistic,  // encrypt when possible, use the server unauthenticated, else cleartext
};

struct UpstreamAddress {
    UpstreamAddress() = default;
    UpstreamAddress(const SocketAddress& a) : address(a) {}  // NOLINT: a plain upstream

    SocketAddress address;
    bool tls = false;    // TLS below: tls:// and https:// alike (the same authentication)
    bool https = false;  // DNS over HTTPS: HTTP/2 requests to `path`
    std::string path;    // https:// only: the request path, "/dns-query" unless given
    std::string auth_name;

    std::string to_string() const;
    uint16_t port() const { return address.port(); }
    bool operator==(const UpstreamAddress& other) const {
        return address == other.address && tls == other.tls && https == other.https &&
               path == other.path && auth_name == other.auth_name;
    }
};

std::optional<UpstreamAddress> parse_upstream_address(std::string_view text);

// A pinned SPKI hash (RFC 7858 §4.2) for the TLS upstream at `address`: "ADDR[:PORT] BASE64".
struct SpkiPin {
    SocketAddress address;
    std::string sha256;  // 32 raw bytes
};

// "ADDR[:PORT] BASE64" (port 853 by default, so an https:// upstream's pin names its port, 443
// or another; the base64 of 32 bytes, as `openssl pkey -pubin
// -outform der | openssl dgst -sha256 -binary | base64` prints it).
std::optional<SpkiPin> parse_spki_pin(std::string_view text);

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
