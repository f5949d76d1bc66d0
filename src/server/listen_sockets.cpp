// SPDX-License-Identifier: BSD-3-Clause
#include "server/listen_sockets.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

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

void prepare_inherited(int fd, bool udp) {
    const int flags = fcntl(fd, F_GETFL);
    if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    if (!udp) return;
    // Queries queue here while a restart replaces the process: ask for a large buffer (the
    // socket unit's ReceiveBuffer= may have set one already).
    int current = 0;
    socklen_t length = sizeof current;
    getsockopt(fd, SOL_SOCKET, SO_RCVBUF, &current, &length);
    if (current < kReceiveBufferBytes) {
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &kReceiveBufferBytes, sizeof kReceiveBufferBytes);
    }
}

// The given sockets of one address and protocol, to the workers. As many as the workers (or a
// multiple: SO_REUSEPORT sockets, one per worker of the process that made them): each worker
// gets its own, as when binding. Otherwise every worker polls every one, through a descriptor
// of its own (dup: each closes its own). Measured (4 workers, 3,000 q/s of cache hits, daemon
// CPU per query, medians of 3): own sockets 20 us, one shared socket with EPOLLEXCLUSIVE
// 32 us, without it 41 us (every worker woke per datagram).
bool distribute(const std::vector<int>& fds, unsigned workers, std::vector<std::vector<int>>& group,
                std::string& error) {
    if (fds.size() % workers == 0) {
        for (size_t i = 0; i < fds.size(); ++i) group[i % workers].push_back(fds[i]);
        return true;
    }
    // Worker 0 holds the given descriptors first: close_all() then closes them on an error.
    group[0].insert(group[0].end(), fds.begin(), fds.end());
    for (int fd : fds) {
        for (unsigned w = 1; w < workers; ++w) {
            const int copy = fcntl(fd, F_DUPFD_CLOEXEC, 3);
            if (copy < 0) {
                error = std::strerror(errno);
                return false;
            }
            group[w].push_back(copy);
        }
    }
    return true;
}

Result<void> adopt_inherited(unsigned workers, InheritedSockets& inherited, ListenSockets& out) {
    for (const char* name : {InheritedSockets::kDnsUdp, InheritedSockets::kDnsTcp}) {
        const bool udp = name == InheritedSockets::kDnsUdp;
        // By address, in the order given.
        std::vector<std::pair<SocketAddress, std::vector<int>>> by_address;
        for (int fd : inherited.take(name)) {
            prepare_inherited(fd, udp);
            const SocketAddress address = local_address(fd);
            auto same = std::find_if(by_address.begin(), by_address.end(),
                                     [&](const auto& entry) { return entry.first == address; });
            if (same == by_address.end()) {
                by_address.push_back({address, {fd}});
            } else {
                same->second.push_back(fd);
            }
        }
        for (size_t a = 0; a < by_address.size(); ++a) {
            const auto& [address, fds] = by_address[a];
            std::string error;
            if (!distribute(fds, workers, udp ? out.udp : out.tcp, error)) {
                out.close_all();
                for (size_t rest = a + 1; rest < by_address.size(); ++rest) {
                    for (int fd : by_address[rest].second) close(fd);
                }
                return Error{"cannot duplicate an inherited socket: " + error};
            }
            (udp ? out.udp_addresses : out.tcp_addresses).push_back(address);
            log_info("listening on %s %s", udp ? "udp" : "tcp", address.to_string().c_str());
        }
    }
    out.shared = true;
    return {};
}

bool is_unspecified(const SocketAddress& a) {
    if (a.family() == AF_INET) {
        return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == INADDR_ANY;
    }
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
}

// The served socket that already answers `wanted` (port 0: any port on its address), or
// null. One bound to the unspecified address of the family on that port covers every
// address: binding beside it would fail (EADDRINUSE) and would add nothing.
const SocketAddress* covering(const SocketAddress& wanted,
                              const std::vector<SocketAddress>& served) {
    for (const SocketAddress& a : served) {
        if (a.family() != wanted.family()) continue;
        SocketAddress any_port = a;
        any_port.set_port(0);
        if (wanted.port() == 0 ? any_port == wanted : a == wanted) return &a;
        if (is_unspecified(a) && (wanted.port() == 0 || a.port() == wanted.port())) return &a;
    }
    return nullptr;
}

std::string join(const std::vector<std::string>& items) {
    std::string text;
    for (const std::string& item : items) text += (text.empty() ? "" : ", ") + item;
    return text.empty() ? "none" : text;
}

// Binds `address` for the protocols asked, one SO_REUSEPORT socket per worker each. `skipped`:
// a default address the machine lacks (no IPv6 loopback), with a warning.
Result<void> bind_address(SocketAddress address, bool udp, bool tcp, bool is_default,
                          unsigned workers, ListenSockets& out, std::vector<std::string>& bound) {
    std::string error;
    if (address.port() == 0) {
        if (auto resolved = resolve_port_zero(address); !resolved) return resolved;
    }
    std::vector<int> types;
    if (udp) types.push_back(SOCK_DGRAM);
    if (tcp) types.push_back(SOCK_STREAM);
    for (int type : types) {
        if (port_is_free(address, type, error)) continue;
        if (is_default && address.family() == AF_INET6) {
            log_warning("skipping %s: %s", address.to_string().c_str(), error.c_str());
            return {};
        }
        return Error{std::string("cannot bind ") + type_name(type) + " " + address.to_string() +
                     ": " + error};
    }
    for (unsigned w = 0; w < workers; ++w) {
        for (int type : types) {
            const int fd = open_socket(address, type, true, error);
            if (fd < 0) {
                return Error{std::string("cannot bind ") + type_name(type) + " " +
                             address.to_string() + ": " + error};
            }
            (type == SOCK_DGRAM ? out.udp : out.tcp)[w].push_back(fd);
            out.bound_here.push_back(fd);
        }
    }
    for (int type : types) {
        (type == SOCK_DGRAM ? out.udp_addresses : out.tcp_addresses).push_back(address);
        log_info("listening on %s %s", type_name(type), address.to_string().c_str());
        bound.push_back(std::string(type_name(type)) + " " + address.to_string());
    }
    return {};
}

// The DoT or DoH listeners: one SO_REUSEPORT TCP socket per worker and address. They are
// never given (no socket unit or takeover hands them): `beside_given` (a takeover or socket
// activation is under way) skips the check that the port is free, as the instance being
// replaced still holds it, and the kernel spreads new connections over both until it closes.
Result<void> bind_stream_listeners(const std::vector<SocketAddress>& addresses, const char* what,
                                   unsigned workers, bool beside_given,
                                   std::vector<std::vector<int>>& fds,
                                   std::vector<SocketAddress>& served,
                                   std::vector<int>& bound_here) {
    std::string error;
    for (SocketAddress address : addresses) {
        if (address.port() == 0) {
            const int probe = open_socket(address, SOCK_STREAM, false, error);
            if (probe < 0) return Error{"cannot bind tcp " + address.to_string() + ": " + error};
            address.set_port(bound_port(probe));
            close(probe);
        } else if (!beside_given && !port_is_free(address, SOCK_STREAM, error)) {
            return Error{"cannot bind tcp " + address.to_string() + " (" + what + "): " + error};
        }
        for (unsigned w = 0; w < workers; ++w) {
            const int fd = open_socket(address, SOCK_STREAM, true, error);
            if (fd < 0) {
                return Error{"cannot bind tcp " + address.to_string() + " (" + what +
                             "): " + error};
            }
            fds[w].push_back(fd);
            bound_here.push_back(fd);
        }
        served.push_back(address);
        log_info("listening on tcp %s (%s)", address.to_string().c_str(), what);
    }
    return {};
}

}  // namespace

void ListenSockets::close_all() {
    for (auto* group : {&udp, &tcp, &tls, &https}) {
        for (auto& per_worker : *group) {
            for (int fd : per_worker) {
                if (fd >= 0) close(fd);
            }
        }
        group->clear();
    }
    bound_here.clear();
}

Result<void> open_listen_sockets(const Config& config, unsigned workers, ListenSockets& out,
                                 InheritedSockets* inherited) {
    out.udp.assign(workers, {});
    out.tcp.assign(workers, {});
    out.tls.assign(workers, {});
    out.https.assign(workers, {});
    const bool given = inherited != nullptr && (inherited->has(InheritedSockets::kDnsUdp) ||
                                                inherited->has(InheritedSockets::kDnsTcp));
    if (given) {
        if (auto adopted = adopt_inherited(workers, *inherited, out); !adopted) return adopted;
        std::vector<std::string> served;
        for (const auto& a : out.udp_addresses) served.push_back("udp " + a.to_string());
        for (const auto& a : out.tcp_addresses) served.push_back("tcp " + a.to_string());
        log_info("serving the given DNS sockets: %s", join(served).c_str());
        // The socket units stand in for the default `listen` (they are made for it): only
        // addresses the configuration names are added to them.
        if (config.listen_is_default) {
            log_info("listen is the default: no address bound beside the given sockets");
            return {};
        }
    }
    std::vector<std::string> bound;
    for (SocketAddress address : config.listen) {
        const SocketAddress* udp = covering(address, out.udp_addresses);
        const SocketAddress* tcp = covering(address, out.tcp_addresses);
        if (udp != nullptr && tcp != nullptr) continue;
        // Port 0 is one port for both protocols: the one a given socket has, if any.
        if (address.port() == 0 && (udp != nullptr || tcp != nullptr)) {
            address.set_port((udp != nullptr ? udp : tcp)->port());
        }
        if (auto opened = bind_address(address, udp == nullptr, tcp == nullptr,
                                       config.listen_is_default, workers, out, bound);
            !opened) {
            out.close_all();
            return opened;
        }
    }
    if (given) log_info("listen addresses bound beside them: %s", join(bound).c_str());
    if (out.udp_addresses.empty() && out.tcp_addresses.empty()) {
        out.close_all();
        return Error{"no address to listen on"};
    }
    for (auto [addresses, what, fds, served] :
         {std::tuple{&config.listen_tls, "DNS over TLS", &out.tls, &out.tls_addresses},
          std::tuple{&config.listen_https, "DNS over HTTPS", &out.https, &out.https_addresses}}) {
        if (auto opened = bind_stream_listeners(*addresses, what, workers, inherited != nullptr,
                                                *fds, *served, out.bound_here);
            !opened) {
            out.close_all();
            return opened;
        }
    }
    return {};
}

}  // namespace nscache::server
