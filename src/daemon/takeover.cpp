// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/takeover.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nscache::daemon {
namespace {

constexpr std::string_view kLockPrefix = "lock:";

void set_receive_timeout(int fd, int seconds) {
    timeval tv{seconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

}  // namespace

Handover::~Handover() {
    control::close_all(fds_);
    for (const auto& [path, fd] : locks_) close(fd);
    if (connection_ >= 0) close(connection_);
}

Result<Handover::Answer> Handover::request(const std::string& control_path,
                                           const std::vector<uid_t>& trusted_uids) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (control_path.size() >= sizeof addr.sun_path) {
        return Error{"control socket path too long: " + control_path};
    }
    std::memcpy(addr.sun_path, control_path.c_str(), control_path.size() + 1);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return Error{std::string("cannot create a socket: ") + std::strerror(errno)};
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int e = errno;
        close(fd);
        if (e == ENOENT || e == ECONNREFUSED) return Answer::NoInstance;
        return Error{"--takeover: cannot reach the running instance on " + control_path + ": " +
                     std::strerror(e)};
    }
    ucred server{};
    socklen_t length = sizeof server;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &server, &length) != 0 ||
        std::find(trusted_uids.begin(), trusted_uids.end(), server.uid) == trusted_uids.end()) {
        close(fd);
        return Error{"--takeover: the socket " + control_path + " is served by uid " +
                     std::to_string(server.uid) +
                     ", not root, `user` or this process's user: its offer is not trusted"};
    }
    set_receive_timeout(fd, kOfferTimeoutS);
    const char request[] = "takeover\n";
    if (send(fd, request, sizeof request - 1, MSG_NOSIGNAL) != sizeof request - 1) {
        close(fd);
        return Error{"--takeover: cannot send the request on " + control_path};
    }
    Result<std::vector<control::NamedFd>> got = control::receive_takeover(fd);
    if (!got) {
        close(fd);
        if (got.error() == control::kClosedBeforeOffer ||
            got.error() == control::kStoppingRefusal) {
            return Answer::Gone;
        }
        return Error{"--takeover: the instance on " + control_path + " refused: " + got.error()};
    }
    connection_ = fd;
    for (control::NamedFd& f : *got) {
        if (f.name.rfind(kLockPrefix, 0) == 0) {
            const std::string path = f.name.substr(kLockPrefix.size());
            if (!locks_.emplace(path, f.fd).second) close(f.fd);
        } else {
            fds_.push_back(std::move(f));
        }
    }
    return Answer::Offer;
}

Result<void> Handover::check_cache_memfd(int fd, uint64_t max_bytes) {
    constexpr int kNeeded = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW;
    const int seals = fcntl(fd, F_GET_SEALS);
    if (seals < 0 || (seals & kNeeded) != kNeeded) {
        return Error{"the cache descriptor is not a memfd sealed against writes"};
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return Error{"the cache descriptor is not a file"};
    if (static_cast<uint64_t>(st.st_size) > max_bytes) {
        return Error{"the cache descriptor holds " + std::to_string(st.st_size) +
                     " bytes, more than " + std::to_string(max_bytes)};
    }
    return {};
}

int Handover::take(const std::string& name) {
    for (auto it = fds_.begin(); it != fds_.end(); ++it) {
        if (it->name == name) {
            const int fd = it->fd;
            fds_.erase(it);
            return fd;
        }
    }
    return -1;
}

std::vector<int> Handover::take_all(const std::string& name) {
    std::vector<int> taken;
    for (int fd = take(name); fd >= 0; fd = take(name)) taken.push_back(fd);
    return taken;
}

Result<void> Handover::confirm_ready() {
    if (connection_ < 0) return {};
    set_receive_timeout(connection_, kConfirmTimeoutS);
    const char ready[] = "ready\n";
    std::string reply;
    if (send(connection_, ready, sizeof ready - 1, MSG_NOSIGNAL) == sizeof ready - 1) {
        char buf[128];
        for (;;) {
            const ssize_t n = recv(connection_, buf, sizeof buf, 0);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) break;
            reply.append(buf, static_cast<size_t>(n));
            if (reply.find('\n') != std::string::npos || reply.size() > 100) break;
        }
    }
    close(connection_);
    connection_ = -1;
    if (reply.rfind("ok", 0) != 0) {
        return Error{
            "the running instance did not confirm it drains (" +
            (reply.empty() ? std::string("no answer") : reply.substr(0, reply.find('\n'))) + ")"};
    }
    return {};
}

}  // namespace nscache::daemon
