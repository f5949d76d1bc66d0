#include "common/request_connection.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nscache {

RequestConnection::RequestConnection(RequestConnections& owner, int fd, uint64_t id)
    : owner_(owner), fd_(fd), id_(id) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
        peer_pid_ = cred.pid;
        peer_uid_ = cred.uid;
    }
}

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
    owner_.release(this);
}

RequestConnections::RequestConnections(EventLoop& loop, RequestHandler& handler,
                                       size_t max_connections, uint64_t timeout_ms)
    : loop_(loop), handler_(handler), timeout_ms_(timeout_ms), open_(max_connections) {}

RequestConnections::~RequestConnections() {
    clear();
}

void RequestConnections::adopt(int fd) {
    uint64_t id;
    std::unique_ptr<RequestConnection>* slot = open_.add(id);
    if (slot == nullptr) {  // max_connections open: the client falls back (NSS, or no nscd)
        close(fd);
        return;
    }
    *slot = std::make_unique<RequestConnection>(*this, fd, id);
    if (!(*slot)->start()) open_.remove(id);  // the destructor closes fd
}

RequestConnection* RequestConnections::find(uint64_t id) {
    std::unique_ptr<RequestConnection>* slot = open_.find(id);
    return slot == nullptr ? nullptr : slot->get();
}

void RequestConnections::release(RequestConnection* connection) {
    std::unique_ptr<RequestConnection>* slot = open_.find(connection->id());
    if (slot == nullptr) return;
    graveyard_.push_back(std::move(*slot));
    open_.remove(connection->id());
    if (graveyard_.size() == 1) loop_.add_timer(0, [this] { graveyard_.clear(); });
}

void RequestConnections::clear() {
    open_.clear();
    graveyard_.clear();
}

}  // namespace nscache
