// SPDX-License-Identifier: BSD-3-Clause
#include "server/listen_sockets.h"

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
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return SocketAddress{};
    return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// A handed socket serves `address` (port 0 in the config: any port of that address).
bool serves(const SocketAddress& handed, const SocketAddress& address) {
    if (address.port() != 0) return handed == address;
    SocketAddress any = handed;
    any.set_port(0);
    return any == address;
}

// Takes from `pool` the sockets that serve `address`.
std::vector<int> take_matching(std::vector<int>& pool, const SocketAddress& address) {
    std::vector<int> taken;
    std::vector<int> rest;
    for (int fd : pool) (serves(local_address(fd), address) ? taken : rest).push_back(fd);
    pool = std::move(rest);
    return taken;
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

Result<void> open_listen_sockets(const Config& config, unsigned workers, ListenSockets& out) {
    out.udp.assign(workers, {});
    out.tcp.assign(workers, {});
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

Result<void> adopt_listen_sockets(const Config& config, unsigned workers, std::vector<int> udp,
                                  std::vector<int> tcp, ListenSockets& out) {
    out.udp.assign(workers, {});
    out.tcp.assign(workers, {});
    Config rest = config;
    rest.listen.clear();
    auto close_fds = [](std::vector<int>& fds) {
        for (int fd : fds) close(fd);
        fds.clear();
    };
    for (const SocketAddress& address : config.listen) {
        std::vector<int> handed[2] = {take_matching(udp, address), take_matching(tcp, address)};
        if (handed[0].empty() || handed[1].empty()) {
            close_fds(handed[0]);
            close_fds(handed[1]);
            rest.listen.push_back(address);  // bound below, as without a takeover
            continue;
        }
        const SocketAddress bound = local_address(handed[0].front());
        for (int t = 0; t < 2; ++t) {
            auto& group = t == 0 ? out.udp : out.tcp;
            for (size_t i = 0; i < handed[t].size(); ++i) group[i % workers].push_back(handed[t][i]);
            // Workers beyond the handed sockets join the same SO_REUSEPORT group.
            for (unsigned w = static_cast<unsigned>(handed[t].size()); w < workers; ++w) {
                std::string error;
                const int fd = open_socket(bound, t == 0 ? SOCK_DGRAM : SOCK_STREAM, true, error);
                if (fd < 0) {
                    close_fds(udp);
                    close_fds(tcp);
                    out.close_all();
                    return Error{std::string("cannot bind ") + (t == 0 ? "udp " : "tcp ") +
                                 bound.to_string() + ": " + error};
                }
                group[w].push_back(fd);
            }
        }
        out.addresses.push_back(bound);
        log_info("takeover: %zu udp and %zu tcp sockets on %s", handed[0].size(), handed[1].size(),
                 bound.to_string().c_str());
        log_info("listening on udp %s", bound.to_string().c_str());
        log_info("listening on tcp %s", bound.to_string().c_str());
    }
    for (int fd : udp) {
        log_info("takeover: %s is not configured here: closed", local_address(fd).to_string().c_str());
    }
    close_fds(udp);
    close_fds(tcp);
    if (rest.listen.empty()) return {};
    // Addresses the running instance did not serve.
    ListenSockets more;
    rest.listen_is_default = config.listen_is_default;
    if (auto opened = open_listen_sockets(rest, workers, more); !opened) {
        if (!out.addresses.empty() && rest.listen_is_default) return {};
        out.close_all();
        return opened;
    }
    for (unsigned w = 0; w < workers; ++w) {
        out.udp[w].insert(out.udp[w].end(), more.udp[w].begin(), more.udp[w].end());
        out.tcp[w].insert(out.tcp[w].end(), more.tcp[w].begin(), more.tcp[w].end());
    }
    out.addresses.insert(out.addresses.end(), more.addresses.begin(), more.addresses.end());
    return {};
}

}  // namespace nscache::server
