// SPDX-License-Identifier: BSD-3-Clause
#include "common/inherited_sockets.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdlib>
#include <cstring>

namespace nscache {
namespace {

// sd_listen_fds(3): descriptors start at SD_LISTEN_FDS_START; a count past a few thousand is
// not a socket unit's.
constexpr int kMaxInherited = 4096;

bool parse_number(std::string_view text, long& out) {
    if (text.empty()) return false;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
}

std::vector<std::string> split_names(std::string_view names) {
    std::vector<std::string> out;
    size_t start = 0;
    while (true) {
        const size_t colon = names.find(':', start);
        out.emplace_back(
            names.substr(start, colon == std::string_view::npos ? colon : colon - start));
        if (colon == std::string_view::npos) break;
        start = colon + 1;
    }
    return out;
}

bool known_name(std::string_view name) {
    for (const char* k :
         {InheritedSockets::kDnsUdp, InheritedSockets::kDnsTcp, InheritedSockets::kControl,
          InheritedSockets::kNss, InheritedSockets::kNscd}) {
        if (name == k) return true;
    }
    return false;
}

bool unique_name(std::string_view name) {
    return name != InheritedSockets::kDnsUdp && name != InheritedSockets::kDnsTcp;
}

int socket_option(int fd, int option, bool& ok) {
    int value = 0;
    socklen_t length = sizeof value;
    ok = getsockopt(fd, SOL_SOCKET, option, &value, &length) == 0;
    return value;
}

// Bound: getsockname gives a port (inet) or a path or abstract name (unix).
bool is_bound(int fd, int domain) {
    sockaddr_storage ss{};
    socklen_t length = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &length) != 0) return false;
    if (domain == AF_INET) return reinterpret_cast<sockaddr_in*>(&ss)->sin_port != 0;
    if (domain == AF_INET6) return reinterpret_cast<sockaddr_in6*>(&ss)->sin6_port != 0;
    return length > sizeof(sa_family_t);
}

}  // namespace

InheritedSockets::~InheritedSockets() {
    close_all();
}

InheritedSockets::InheritedSockets(InheritedSockets&& other) noexcept
    : sockets_(std::move(other.sockets_)) {
    other.sockets_.clear();
}

InheritedSockets& InheritedSockets::operator=(InheritedSockets&& other) noexcept {
    if (this != &other) {
        close_all();
        sockets_ = std::move(other.sockets_);
        other.sockets_.clear();
    }
    return *this;
}

Result<InheritedSockets> InheritedSockets::from_environment() {
    auto get = [](const char* name) -> const char* { return std::getenv(name); };
    Result<InheritedSockets> parsed =
        parse(get("LISTEN_PID"), get("LISTEN_FDS"), get("LISTEN_FDNAMES"), getpid());
    // As sd_listen_fds(unset=1), whatever they said: they were for this process only.
    for (const char* name : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"}) unsetenv(name);
    if (!parsed) return parsed;
    for (const auto& [name, fd] : parsed->sockets_) {
        const int flags = fcntl(fd, F_GETFD);
        if (flags < 0) {
            return Error{"socket activation: descriptor " + std::to_string(fd) + " (" + name +
                         ") is not open"};
        }
        fcntl(fd, F_SETFD, flags | FD_CLOEXEC);
    }
    if (auto valid = parsed->validate(); !valid)
        return Error{"socket activation: " + valid.error()};
    return parsed;
}

Result<InheritedSockets> InheritedSockets::parse(const char* listen_pid, const char* listen_fds,
                                                 const char* listen_fdnames, pid_t self,
                                                 int first_fd) {
    InheritedSockets out;
    if (listen_pid == nullptr) return out;
    long pid = 0;
    if (!parse_number(listen_pid, pid)) {
        return Error{std::string("socket activation: LISTEN_PID '") + listen_pid +
                     "' is not a process id"};
    }
    if (pid != self) return out;  // meant for the process that started us
    long count = 0;
    if (listen_fds == nullptr || !parse_number(listen_fds, count) || count < 0 ||
        count > kMaxInherited) {
        return Error{std::string("socket activation: LISTEN_FDS '") +
                     (listen_fds ? listen_fds : "") + "' is not a descriptor count"};
    }
    if (listen_fdnames == nullptr) {
        return Error{
            "socket activation: LISTEN_FDNAMES is missing: name each socket "
            "(FileDescriptorName=dns-udp, dns-tcp, control, nss or nscd)"};
    }
    const std::vector<std::string> names =
        count == 0 ? std::vector<std::string>{} : split_names(listen_fdnames);
    if (static_cast<long>(names.size()) != count) {
        return Error{"socket activation: LISTEN_FDS says " + std::to_string(count) +
                     " descriptors but LISTEN_FDNAMES names " + std::to_string(names.size())};
    }
    for (long i = 0; i < count; ++i) {
        const std::string& name = names[static_cast<size_t>(i)];
        const int fd = first_fd + static_cast<int>(i);
        if (!known_name(name)) {
            return Error{"socket activation: descriptor " + std::to_string(fd) +
                         " has an unknown name '" + name +
                         "' (expected dns-udp, dns-tcp, control, nss or nscd)"};
        }
        if (unique_name(name) && out.has(name)) {
            return Error{"socket activation: more than one socket named '" + name + "'"};
        }
        out.sockets_.emplace_back(name, fd);
    }
    return out;
}

Result<void> InheritedSockets::validate() const {
    for (const auto& [name, fd] : sockets_) {
        if (auto valid = validate_one(name, fd); !valid) return valid;
    }
    return {};
}

Result<void> InheritedSockets::validate_one(std::string_view name, int fd) {
    bool ok_type = false, ok_domain = false, ok_listening = false, ok_protocol = false;
    const int type = socket_option(fd, SO_TYPE, ok_type);
    const int domain = socket_option(fd, SO_DOMAIN, ok_domain);
    const int listening = socket_option(fd, SO_ACCEPTCONN, ok_listening);
    const int protocol = socket_option(fd, SO_PROTOCOL, ok_protocol);
    const std::string which = "descriptor " + std::to_string(fd) + " (" + std::string(name) + ") ";
    if (!ok_type || !ok_domain) return Error{which + "is not a socket"};
    const bool inet = name == kDnsUdp || name == kDnsTcp || name == kMetrics || name == kHealth;
    const int want_type = name == kDnsUdp ? SOCK_DGRAM : SOCK_STREAM;
    if (type != want_type) {
        return Error{which + "is not a " + (want_type == SOCK_DGRAM ? "datagram" : "stream") +
                     " socket"};
    }
    if (inet && domain != AF_INET && domain != AF_INET6) {
        return Error{which + "is not an IPv4 or IPv6 socket"};
    }
    if (!inet && domain != AF_UNIX) return Error{which + "is not a unix socket"};
    const int want_protocol = want_type == SOCK_DGRAM ? IPPROTO_UDP : IPPROTO_TCP;
    if (inet && (!ok_protocol || protocol != want_protocol)) {
        return Error{which + "is not a " + (want_protocol == IPPROTO_UDP ? "UDP" : "TCP") +
                     " socket (protocol " + std::to_string(protocol) + ")"};
    }
    if (!is_bound(fd, domain)) return Error{which + "is not bound to an address"};
    if (type == SOCK_STREAM && (!ok_listening || listening == 0)) {
        return Error{which + "is not listening"};
    }
    return {};
}

void InheritedSockets::add(std::string name, int fd) {
    sockets_.emplace_back(std::move(name), fd);
}

std::vector<int> InheritedSockets::take(std::string_view name) {
    std::vector<int> out;
    std::erase_if(sockets_, [&](const std::pair<std::string, int>& s) {
        if (s.first != name) return false;
        out.push_back(s.second);
        return true;
    });
    return out;
}

std::optional<int> InheritedSockets::take_one(std::string_view name) {
    std::vector<int> fds = take(name);
    if (fds.empty()) return std::nullopt;
    for (size_t i = 1; i < fds.size(); ++i) close(fds[i]);
    return fds.front();
}

bool InheritedSockets::has(std::string_view name) const {
    return std::any_of(sockets_.begin(), sockets_.end(),
                       [&](const auto& s) { return s.first == name; });
}

void InheritedSockets::close_all() {
    for (const auto& s : sockets_) close(s.second);
    sockets_.clear();
}

}  // namespace nscache
