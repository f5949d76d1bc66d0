// SPDX-License-Identifier: BSD-3-Clause
#include "common/request_connection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace nscache {

RequestConnection::RequestConnection(RequestConnections& owner, int fd, uint64_t id, pid_t peer_pid,
                                     uid_t peer_uid)
    : owner_(owner), fd_(fd), id_(id), peer_pid_(peer_pid), peer_uid_(peer_uid) {}

RequestConnection::~RequestConnection() {
    owner_.loop_.cancel_timer(timer_);
    if (pass_fd_ >= 0) close(pass_fd_);
    if (fd_ >= 0) {
        owner_.loop_.remove(registration_);
        close(fd_);
    }
}

bool RequestConnection::start() {
    EventLoop& loop = owner_.loop_;
    if (!loop.add(fd_, EPOLLIN, this, registration_)) return false;
    timer_ = loop.add_timer(loop.now_ms() + owner_.timeout_ms_, [this] {
        timer_ = EventLoop::kNoTimer;
        shut();
    });
    return true;
}

void RequestConnection::on_event(uint32_t events) {
    if (fd_ < 0) return;
    if (writing_) {
        write_out();
        return;
    }
    // A client that sent its request and hung up is still read: its lookup starts (and may
    // fill the map for the next caller); the connection closes when the answer's write fails.
    if ((events & (EPOLLERR | EPOLLHUP)) && !(events & EPOLLIN)) {
        shut();
        return;
    }
    read_in();
}

void RequestConnection::send(std::vector<uint8_t> bytes, int pass_fd) {
    if (fd_ < 0) return;
    if (bytes.empty()) {
        shut();
        return;
    }
    out_ = std::move(bytes);
    // A copy of our own: its owner may close or replace it (a map rotated) while the client
    // is slow to read.
    pass_fd_ = pass_fd >= 0 ? fcntl(pass_fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (pass_fd >= 0 && pass_fd_ < 0) {  // out of descriptors: no reply, the client falls back
        shut();
        return;
    }
    writing_ = true;
    write_out();
}

void RequestConnection::read_in() {
    uint8_t buffer[2048];
    const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    if (n <= 0) {
        shut();
        return;
    }
    in_.insert(in_.end(), buffer, buffer + n);
    const size_t total = owner_.handler_.request_size(in_);
    if (total == RequestHandler::kInvalid) {
        shut();
        return;
    }
    if (total == 0 || in_.size() < total) return;
    if (in_.size() > total) {  // one request per connection
        shut();
        return;
    }
    owner_.loop_.modify(registration_, 0);  // nothing more to read; the answer re-arms
    owner_.handler_.on_request(*this, in_);
}

ssize_t RequestConnection::send_some() {
    if (pass_fd_ < 0) {
        return ::send(fd_, out_.data() + offset_, out_.size() - offset_, MSG_NOSIGNAL);
    }
    iovec iov{out_.data() + offset_, out_.size() - offset_};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    std::memcpy(CMSG_DATA(c), &pass_fd_, sizeof(int));
    const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n > 0) {  // sent with the first byte
        close(pass_fd_);
        pass_fd_ = -1;
    }
    return n;
}

void RequestConnection::write_out() {
    while (offset_ < out_.size()) {
        const ssize_t n = send_some();
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) {
            owner_.loop_.modify(registration_, EPOLLOUT);
            return;
        }
        if (n <= 0) break;
        offset_ += static_cast<size_t>(n);
    }
    shut();
}

void RequestConnection::shut() {
    if (fd_ < 0) return;
    owner_.loop_.cancel_timer(timer_);
    timer_ = EventLoop::kNoTimer;
    owner_.loop_.remove(registration_);
    close(fd_);
    fd_ = -1;
    if (pass_fd_ >= 0) close(pass_fd_);
    pass_fd_ = -1;
    owner_.handler_.on_close(*this);
    owner_.release(this);
}

RequestConnections::RequestConnections(EventLoop& loop, RequestHandler& handler,
                                       size_t max_connections, uint64_t timeout_ms,
                                       size_t max_per_user)
    : loop_(loop),
      handler_(handler),
      timeout_ms_(timeout_ms),
      max_per_user_(max_per_user != 0 ? max_per_user : std::max<size_t>(1, max_connections / 4)),
      open_(max_connections) {}

RequestConnections::~RequestConnections() {
    clear();
}

void RequestConnections::adopt(int fd) {
    ucred cred{};
    cred.pid = -1;
    cred.uid = static_cast<uid_t>(-1);  // unknown: one share for all such
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        cred.pid = -1;
        cred.uid = static_cast<uid_t>(-1);
    }
    size_t& mine = per_user_[cred.uid];
    // Root is no hostile local user, and a root service's thread pool at a cold start may have
    // more lookups in flight than a share: it is held to the total only.
    const bool within_share = cred.uid == 0 || mine < max_per_user_;
    uint64_t id;
    std::unique_ptr<RequestConnection>* slot = within_share ? open_.add(id) : nullptr;
    if (slot == nullptr) {  // full, or this user's share is: the client falls back (NSS, no nscd)
        if (mine == 0) per_user_.erase(cred.uid);
        close(fd);
        return;
    }
    *slot = std::make_unique<RequestConnection>(*this, fd, id, cred.pid, cred.uid);
    if (!(*slot)->start()) {
        open_.remove(id);  // the destructor closes fd
        if (mine == 0) per_user_.erase(cred.uid);
        return;
    }
    ++mine;
}

RequestConnection* RequestConnections::find(uint64_t id) {
    std::unique_ptr<RequestConnection>* slot = open_.find(id);
    return slot == nullptr ? nullptr : slot->get();
}

void RequestConnections::release(RequestConnection* connection) {
    std::unique_ptr<RequestConnection>* slot = open_.find(connection->id());
    if (slot == nullptr) return;
    auto user = per_user_.find(connection->peer_uid());
    if (user != per_user_.end() && --user->second == 0) per_user_.erase(user);
    graveyard_.push_back(std::move(*slot));
    open_.remove(connection->id());
    if (graveyard_.size() == 1) loop_.add_timer(0, [this] { graveyard_.clear(); });
}

void RequestConnections::clear() {
    open_.clear();
    per_user_.clear();
    graveyard_.clear();
}

}  // namespace nscache
