// SPDX-License-Identifier: BSD-3-Clause
#include "common/listener.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace nscache {
namespace {

// Connections taken per wake-up: the loop's other sockets get their turn in between.
constexpr int kAcceptBatch = 16;
constexpr uint64_t kRestMs = 1000;

// The errors accept(2) hands back for one connection only: it was aborted, or Linux passes on
// the new socket's pending network error (and EPERM when a firewall rule forbids it). The
// next connection may be fine, so the listener goes on: resting would let any remote peer
// blank the socket for a second at will.
bool per_connection(int error) {
    switch (error) {
        case ECONNABORTED:
        case ENETDOWN:
        case EPROTO:
        case ENOPROTOOPT:
        case EHOSTDOWN:
        case ENONET:
        case EHOSTUNREACH:
        case EOPNOTSUPP:
        case ENETUNREACH:
        case EPERM:
            return true;
        default:
            return false;
    }
}

}  // namespace

Listener::Listener(EventLoop& loop, int fd, std::string what, OnAccept on_accept)
    : loop_(loop), fd_(fd), what_(std::move(what)), on_accept_(std::move(on_accept)) {
    open_spare();
}

Listener::~Listener() {
    loop_.cancel_timer(rest_timer_);
    loop_.remove(registration_);
    if (spare_fd_ >= 0) close(spare_fd_);
}

void Listener::open_spare() {
    spare_fd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

bool Listener::start() {
    return loop_.add(fd_, EPOLLIN | (exclusive_ ? EPOLLEXCLUSIVE : 0u), this, registration_);
}

void Listener::stop() {
    loop_.cancel_timer(rest_timer_);
    loop_.remove(registration_);
}

void Listener::on_event(uint32_t) {
    for (int i = 0; i < kAcceptBatch; ++i) {
        sockaddr_storage peer{};
        socklen_t length = sizeof peer;
        const int fd =
            accept_(fd_, reinterpret_cast<sockaddr*>(&peer), &length, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            on_accept_(fd, peer, length);
            continue;
        }
        if (errno == EINTR || per_connection(errno)) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) return;
        if (errno == EMFILE || errno == ENFILE) {
            out_of_descriptors();
        } else {
            // ENOBUFS, ENOMEM (the next accept would fail alike), or what accept(2) does not
            // list for a listening socket: rest rather than spin on a level-triggered loop.
            log_warning_limited("%s: cannot accept a connection: %s", what_.c_str(),
                                std::strerror(errno));
            rest();
        }
        return;
    }
}

void Listener::out_of_descriptors() {
    log_warning_limited("%s: cannot accept a connection: out of file descriptors, closing new ones",
                        what_.c_str());
    if (spare_fd_ >= 0) {
        close(spare_fd_);
        const int fd = accept_(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
            close(fd);
            if (on_shed_) on_shed_();
        }
        open_spare();
        if (fd >= 0) return;
    }
    // No spare (another thread took the descriptor), or ENFILE with none free system-wide.
    rest();
}

void Listener::rest() {
    if (rest_timer_ != EventLoop::kNoTimer) return;
    // epoll refuses to modify an EPOLLEXCLUSIVE registration: it leaves and comes back.
    if (exclusive_) {
        loop_.remove(registration_);
    } else {
        loop_.modify(registration_, 0);
    }
    rest_timer_ = loop_.add_timer(loop_.now_ms() + kRestMs, [this] {
        rest_timer_ = EventLoop::kNoTimer;
        if (spare_fd_ < 0) open_spare();  // given up, and not reopened then: try again
        if (exclusive_) {
            start();
        } else {
            loop_.modify(registration_, EPOLLIN);
        }
    });
}

}  // namespace nscache
