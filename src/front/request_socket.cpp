// SPDX-License-Identifier: BSD-3-Clause
#include "front/request_socket.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nscache::front {

RequestSocket::RequestSocket(EventLoop& loop, RequestHandler& handler, RequestSocketOptions options)
    : loop_(loop),
      options_(std::move(options)),
      connections_(loop, handler, options_.max_connections, options_.timeout_ms,
                   options_.max_per_user) {}

RequestSocket::~RequestSocket() {
    close();
}

void RequestSocket::close() {
    listener_.reset();
    connections_.clear();
    if (fd_ >= 0) {
        ::close(fd_);
        if (owns_path_.load(std::memory_order_relaxed)) unlink(options_.path.c_str());
    }
    fd_ = -1;
}

int RequestSocket::dup_fd() const {
    return fd_ >= 0 ? fcntl(fd_, F_DUPFD_CLOEXEC, 0) : -1;
}

Result<void> RequestSocket::bind() {
    if (options_.inherited_fd >= 0) {
        fd_ = options_.inherited_fd;
        fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
        return {};
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.path.size() >= sizeof addr.sun_path) {
        return Error{options_.what + " path too long: " + options_.path};
    }
    std::memcpy(addr.sun_path, options_.path.c_str(), options_.path.size() + 1);
    unlink(options_.path.c_str());
    fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        return Error{"cannot create the " + options_.what + ": " + std::strerror(errno)};
    }
    // Every local user resolves names, as through /etc/resolv.conf: the socket is born 0666.
    // The mode comes from the umask, never from chmod() by path, which root would follow
    // through a symlink planted in a folder another user owns. bind() runs at startup, before
    // the daemon starts its threads, so the process-wide umask changes nothing else.
    const mode_t old_mask = umask(0111);
    const bool bound = ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const int bind_errno = errno;
    umask(old_mask);
    if (!bound) {
        ::close(fd_);
        fd_ = -1;
        return Error{"cannot bind " + options_.what + " " + options_.path + ": " +
                     std::strerror(bind_errno)};
    }
    owns_path_.store(true, std::memory_order_relaxed);
    return {};
}

Result<void> RequestSocket::listen(int backlog) {
    if (::listen(fd_, backlog) != 0) {
        return Error{"cannot listen on " + options_.what + " " + options_.path + ": " +
                     std::strerror(errno)};
    }
    return {};
}

void RequestSocket::start() {
    listener_ = std::make_unique<Listener>(
        loop_, fd_, options_.what,
        [this](int fd, const sockaddr_storage&, socklen_t) { connections_.adopt(fd); });
    listener_->start();
}

}  // namespace nscache::front
