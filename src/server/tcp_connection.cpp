#include "server/tcp_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dns/wire.h"

namespace nscache::server {
namespace {

// Back-pressure thresholds (RFC 7766 §6.2.1.1 lets servers limit pipelining).
constexpr uint32_t kMaxPendingPerConnection = 64;
constexpr size_t kMaxUnsentBytes = 256 << 10;
constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kMaxAnswer = 65535;

}  // namespace

TcpConnection::TcpConnection(TcpConnections& owner, EventLoop& loop, QueryPipeline& pipeline,
                             int fd, uint64_t id, const sockaddr_storage& peer, socklen_t peer_len,
                             uint32_t idle_timeout_ms)
    : owner_(owner),
      loop_(loop),
      pipeline_(pipeline),
      fd_(fd),
      id_(id),
      peer_(peer),
      peer_len_(peer_len),
      idle_timeout_ms_(idle_timeout_ms),
      in_(kReadChunk) {}

TcpConnection::~TcpConnection() {
    loop_.cancel_timer(idle_timer_);
    if (!closed_) {
        loop_.remove(registration_);  // nothing, if registration failed
        close(fd_);
    }
}

bool TcpConnection::register_with_loop() {
    interest_ = EPOLLIN;
    if (!loop_.add(fd_, interest_, this, registration_)) return false;
    last_activity_ms_ = loop_.now_ms();
    arm_idle_timer(last_activity_ms_ + idle_timeout_ms_);
    return true;
}

void TcpConnection::arm_idle_timer(uint64_t at_ms) {
    idle_timer_ = loop_.add_timer(at_ms, [this] {
        idle_timer_ = EventLoop::kNoTimer;
        on_idle_timer();
    });
}

void TcpConnection::on_idle_timer() {
    const uint64_t idle_until = last_activity_ms_ + idle_timeout_ms_;
    if (pending_ == 0 && loop_.now_ms() >= idle_until) {
        close_connection();
        return;
    }
    arm_idle_timer(pending_ > 0 ? loop_.now_ms() + idle_timeout_ms_ : idle_until);
}

void TcpConnection::on_event(uint32_t events) {
    if (closed_) return;
    if (events & (EPOLLERR | EPOLLHUP)) {
        close_connection();
        return;
    }
    if (events & EPOLLOUT) flush();
    if (!closed_ && (events & EPOLLIN)) read_queries();
}

void TcpConnection::read_queries() {
    for (int round = 0; round < 4 && !closed_; ++round) {
        if (in_.size() - in_length_ < kReadChunk / 2) in_.resize(in_length_ + kReadChunk);
        const ssize_t n = recv(fd_, in_.data() + in_length_, in_.size() - in_length_, 0);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) break;
            close_connection();
            return;
        }
        if (n == 0) {
            peer_closed_ = true;
            break;
        }
        in_length_ += static_cast<size_t>(n);
        last_activity_ms_ = loop_.now_ms();
        process_buffer();
        if (pending_ >= kMaxPendingPerConnection || out_.size() - out_offset_ > kMaxUnsentBytes)
            break;
    }
    if (closed_) return;
    flush();
    if (!closed_) update_interest();
}

void TcpConnection::process_buffer() {
    thread_local std::vector<uint8_t> answer(kMaxAnswer);
    size_t offset = 0;
    while (!closed_ && in_length_ - offset >= 2 && pending_ < kMaxPendingPerConnection) {
        const size_t length = dns::read_u16(in_.data() + offset);
        if (length < dns::kHeaderSize || length > kMaxQueryLength) {
            close_connection();
            return;
        }
        if (in_length_ - offset < 2 + length) break;
        ClientOrigin origin;
        origin.transport = Transport::Tcp;
        origin.tcp_connection = id_;
        origin.peer = reinterpret_cast<const sockaddr*>(&peer_);
        origin.peer_len = peer_len_;
        const HandleResult result =
            pipeline_.handle(dns::Bytes(in_.data() + offset + 2, length), origin, answer);
        offset += 2 + length;
        if (result.pending) ++pending_;
        if (result.reply_length > 0)
            queue(std::span<const uint8_t>(answer.data(), result.reply_length));
    }
    if (offset > 0) {
        std::memmove(in_.data(), in_.data() + offset, in_length_ - offset);
        in_length_ -= offset;
    }
}

void TcpConnection::queue(std::span<const uint8_t> answer) {
    const size_t at = out_.size();
    out_.resize(at + 2 + answer.size());
    dns::write_u16(out_.data() + at, static_cast<uint16_t>(answer.size()));
    std::memcpy(out_.data() + at + 2, answer.data(), answer.size());
}

void TcpConnection::send_answer(std::span<const uint8_t> answer) {
    if (closed_) return;
    if (pending_ > 0) --pending_;
    queue(answer);
    flush();
    if (closed_) return;
    // Answers freed room: read queries that were held back.
    if (in_length_ >= 2) process_buffer();
    if (!closed_) {
        flush();
        if (!closed_) update_interest();
    }
}

void TcpConnection::flush() {
    while (out_offset_ < out_.size()) {
        const ssize_t n =
            send(fd_, out_.data() + out_offset_, out_.size() - out_offset_, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            close_connection();
            return;
        }
        out_offset_ += static_cast<size_t>(n);
        last_activity_ms_ = loop_.now_ms();
    }
    if (out_offset_ == out_.size()) {
        out_.clear();
        out_offset_ = 0;
    }
}

void TcpConnection::update_interest() {
    if (peer_closed_ && pending_ == 0 && out_.empty()) {
        close_connection();
        return;
    }
    uint32_t wanted = 0;
    const bool can_read = !peer_closed_ && pending_ < kMaxPendingPerConnection &&
                          out_.size() - out_offset_ <= kMaxUnsentBytes;
    if (can_read) wanted |= EPOLLIN;
    if (!out_.empty()) wanted |= EPOLLOUT;
    if (wanted != interest_) {
        interest_ = wanted;
        loop_.modify(registration_, wanted);
    }
}

void TcpConnection::close_connection() {
    if (closed_) return;
    closed_ = true;
    loop_.cancel_timer(idle_timer_);
    loop_.remove(registration_);
    close(fd_);
    owner_.release(id_);
}

TcpConnections::TcpConnections(EventLoop& loop, QueryPipeline& pipeline,
                               std::atomic<uint32_t>& global_count, uint32_t max_connections,
                               uint32_t idle_timeout_ms)
    : loop_(loop),
      pipeline_(pipeline),
      global_count_(global_count),
      max_connections_(max_connections),
      idle_timeout_ms_(idle_timeout_ms) {}

bool TcpConnections::adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len) {
    if (global_count_.fetch_add(1, std::memory_order_relaxed) >= max_connections_) {
        global_count_.fetch_sub(1, std::memory_order_relaxed);
        close(fd);
        return false;
    }
    uint64_t id;
    std::unique_ptr<TcpConnection>* slot = connections_.add(id);
    if (slot != nullptr) {
        *slot = std::make_unique<TcpConnection>(*this, loop_, pipeline_, fd, id, peer, peer_len,
                                                idle_timeout_ms_);
        if ((*slot)->register_with_loop()) return true;
        connections_.remove(id);  // destroys the connection, which closes fd
    } else {
        close(fd);
    }
    global_count_.fetch_sub(1, std::memory_order_relaxed);
    return false;
}

TcpConnection* TcpConnections::find(uint64_t id) {
    std::unique_ptr<TcpConnection>* slot = connections_.find(id);
    return slot != nullptr ? slot->get() : nullptr;
}

void TcpConnections::release(uint64_t id) {
    std::unique_ptr<TcpConnection>* slot = connections_.find(id);
    if (slot == nullptr) return;
    global_count_.fetch_sub(1, std::memory_order_relaxed);
    // The connection may be on the call stack (it closed itself): destroy it on the next turn.
    graveyard_.push_back(std::move(*slot));
    connections_.remove(id);  // find() no longer returns it
    if (graveyard_.size() == 1) {
        loop_.add_timer(0, [this] { graveyard_.clear(); });
    }
}

void TcpConnections::close_all() {
    connections_.clear();
    graveyard_.clear();
}

}  // namespace nscache::server
