// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace nscache::control {
namespace {

const char* terminator(ConnectionKind kind) {
    return kind == ConnectionKind::Control ? "\n" : "\r\n\r\n";
}

}  // namespace

ControlConnection::ControlConnection(ConnectionOwner& owner, EventLoop& loop, ConnectionKind kind,
                                     int fd, uint64_t id)
    : owner_(owner), loop_(loop), kind_(kind), fd_(fd), id_(id) {}

ControlConnection::~ControlConnection() {
    if (!closed_) {
        loop_.cancel_timer(deadline_);
        loop_.forget(registration_);
        close(fd_);
    }
}

bool ControlConnection::start(uint64_t deadline_ms) {
    if (!loop_.add(fd_, EPOLLIN, this, registration_)) {
        closed_ = true;
        close(fd_);
        return false;
    }
    deadline_ = loop_.add_timer(deadline_ms, [this] {
        deadline_ = EventLoop::kNoTimer;
        close_connection();
    });
    return true;
}

void ControlConnection::on_event(uint32_t events) {
    if (closed_) return;
    if (!answering_) {
        read_request();
    } else if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
        write_answer();
    }
}

bool ControlConnection::request_complete(bool peer_done) const {
    if (peer_done || in_.size() >= kMaxRequest ||
        in_.find(terminator(kind_)) != std::string::npos) {
        return true;
    }
    // HTTP clients that end lines with a bare LF (RFC 9112 2.2 lets a server accept them),
    // answered at their blank line rather than at the deadline.
    return kind_ != ConnectionKind::Control && in_.find("\n\n") != std::string::npos;
}

void ControlConnection::read_request() {
    char buf[1024];
    bool peer_done = false;
    while (!request_complete(false)) {
        const ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n > 0) {
            in_.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        peer_done = true;  // end of stream, or an error: answer what came, if anything
        break;
    }
    if (in_.empty() && peer_done) {
        close_connection();
        return;
    }
    if (kind_ == ConnectionKind::Control) {
        const size_t newline = in_.find('\n');
        if (newline == std::string::npos && !peer_done) {
            out_ = "error: request too long\n";
            answering_ = true;
            write_answer();
            return;
        }
        in_.resize(std::min(newline, in_.size()));
    }
    respond(in_);
}

void ControlConnection::respond(const std::string& request) {
    if (owner_.wants_socket(kind_, request)) {
        // Out of the epoll set (the socket stays open) before the owner registers it anew.
        closed_ = true;
        loop_.cancel_timer(deadline_);
        loop_.remove(registration_);
        owner_.adopt_socket(request, fd_);
        owner_.closed(id_);
        return;
    }
    out_ = owner_.answer(kind_, request);
    answering_ = true;
    write_answer();
}

void ControlConnection::write_answer() {
    while (out_offset_ < out_.size()) {
        const ssize_t n =
            send(fd_, out_.data() + out_offset_, out_.size() - out_offset_, MSG_NOSIGNAL);
        if (n > 0) {
            out_offset_ += static_cast<size_t>(n);
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            loop_.modify(registration_, EPOLLOUT);
            return;
        }
        break;  // the client went away
    }
    close_connection();
}

void ControlConnection::close_connection() {
    if (closed_) return;
    closed_ = true;
    loop_.cancel_timer(deadline_);
    loop_.forget(registration_);
    close(fd_);
    owner_.closed(id_);
}

}  // namespace nscache::control
