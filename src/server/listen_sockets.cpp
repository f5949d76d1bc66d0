// SPDX-License-Identifier: BSD-3-Clause
#include "server/listen_sockets.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace nscache::server {
namespace {

constexpr int kReceiveBufferBytes = 4 << 20;  // absorbs bursts; the kernel caps it at rmem_max
constexpr int kTcpBacklog = 1024;
constexpr int kPortZeroRetries = 20;

int open_socket(const SocketAddress& address, int type, bool reuseport, std::string& error) {
    const int fd = socket(address.family(), type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        error = std::strerror(errno);
        return -1;
    }
    const int one = 1;
    // TCP: rebind over old TIME_WAIT connections after a restart. Not for UDP, where it would
    // let us share a port with another socket that also set it.
    if (type == SOCK_STREAM) setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (reuseport) setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (address.family() == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    if (type == SOCK_DGRAM) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kReceiveBufferBytes, sizeof kReceiveBufferBytes);
    } else {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    if (bind(fd, address.sa(), address.length) != 0 ||
        (type == SOCK_STREAM && listen(fd, kTcpBacklog) != 0)) {
        error = std::strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

// SO_REUSEPORT would let us share a port with another process of the same user (a second
// nscache) without any error. A plain bind first tells us whether the port is really free.
bool port_is_free(const SocketAddress& address, int type, std::string& error) {
    const int fd = open_socket(address, type, false, error);
    if (fd < 0) return false;
    close(fd);
    return true;
}

uint16_t bound_port(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len).port();
}

const char* type_name(int type) {
    return type == SOCK_DGRAM ? "udp" : "tcp";
}

// Chooses a port free for both UDP and TCP when the config says port 0.
Result<void> resolve_port_zero(SocketAddress& address) {
    std::string error;
    for (int attempt = 0; attempt < kPortZeroRetries; ++attempt) {
        SocketAddress any = address;
        any.set_port(0);
        const int fd = open_socket(any, SOCK_DGRAM, false, error);
        if (fd < 0) return Error{"cannot bind udp " + address.to_string() + ": " + error};
        const uint16_t port = bound_port(fd);
        close(fd);
        address.set_port(port);
        if (port_is_free(address, SOCK_STREAM, error) && port_is_free(address, SOCK_DGRAM, error)) {
            return {};
        }
    }
    return Error{"cannot find a free port on " + address.to_string()};
}

SocketAddress local_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len);
    return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// Worker 0 keeps the given descriptor, the others get their own (the same socket): each
// worker closes its own when it stops.
Result<void> adopt_inherited(unsigned workers, InheritedSockets& inherited, ListenSockets& out) {
    for (const char* name : {InheritedSockets::kDnsUdp, InheritedSockets::kDnsTcp}) {
        const bool udp = name == InheritedSockets::kDnsUdp;
        for (int fd : inherited.take(name)) {
            const int flags = fcntl(fd, F_GETFL);
            if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
            if (udp) {
                // Queries queue here while a restart replaces the process: ask for a large
                // buffer (the socket unit's ReceiveBuffer= may have set one already).
                int current = 0;
                socklen_t length = sizeof current;
                getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &current, &length);
                if (current < kReceiveBufferBytes) {
                    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kReceiveBufferBytes,
                               sizeof kReceiveBufferBytes);
                }
            }
            auto& group = udp ? out.udp : out.tcp;
            group[0].push_back(fd);
            for (unsigned w = 1; w < workers; ++w) {
                const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (copy < 0) {
                    const std::string why = std::strerror(errno);
                    out.close_all();
                    return Error{"cannot duplicate an inherited socket: " + why};
                }
                group[w].push_back(copy);
            }
            const SocketAddress address = local_address(fd);
            if (udp) out.addresses.push_back(address);
            log_info("listening on %s %s", udp ? "udp" : "tcp", address.to_string().c_str());
        }
    }
    out.shared = true;
    return {};
}

}  // namespace

void ListenSockets::close_all() {
    for (auto* group : {&udp, &tcp}) {
        for (auto& per_worker : *group) {
            for (int fd : per_worker) {
                if (fd >= 0) close(fd);
            }
        }
        group->clear();
    }
}

Result<void> open_listen_sockets(const Config& config, unsigned workers, ListenSockets& out,
                                 InheritedSockets* inherited) {
    out.udp.assign(workers, {});
    out.tcp.assign(workers, {});
    if (inherited != nullptr &&
        (inherited->has(InheritedSockets::kDnsUdp) || inherited->has(InheritedSockets::kDnsTcp))) {
        return adopt_inherited(workers, *inherited, out);
    }
    for (SocketAddress address : config.listen) {
        std::string error;
        if (address.port() == 0) {
            if (auto resolved = resolve_port_zero(address); !resolved) {
                out.close_all();
                return resolved;
            }
        }
        bool skipped = false;
        for (int type : {SOCK_DGRAM, SOCK_STREAM}) {
            if (port_is_free(address, type, error)) continue;
            if (config.listen_is_default && address.family() == AF_INET6) {
                log_warning("skipping %s: %s", address.to_string().c_str(), error.c_str());
                skipped = true;
                break;
            }
            out.close_all();
            return Error{std::string("cannot bind ") + type_name(type) + " " + address.to_string() +
                         ": " + error};
        }
        if (skipped) continue;
        for (unsigned w = 0; w < workers; ++w) {
            for (int type : {SOCK_DGRAM, SOCK_STREAM}) {
                const int fd = open_socket(address, type, true, error);
                if (fd < 0) {
                    out.close_all();
                    return Error{std::string("cannot bind ") + type_name(type) + " " +
                                 address.to_string() + ": " + error};
                }
                (type == SOCK_DGRAM ? out.udp : out.tcp)[w].push_back(fd);
            }
        }
        out.addresses.push_back(address);
        log_info("listening on udp %s", address.to_string().c_str());
        log_info("listening on tcp %s", address.to_string().c_str());
    }
    if (out.addresses.empty()) {
        out.close_all();
        return Error{"no address to listen on"};
    }
    return {};
}

}  // namespace nscache::server
