// SPDX-License-Identifier: BSD-3-Clause
#include "server/tcp_connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "dns/wire.h"

namespace nscache::server {
namespace {

constexpr size_t kReadChunk = 16 << 10;
constexpr size_t kMaxAnswer = 65535;

}  // namespace

TcpConnection::TcpConnection(TcpConnections& owner, EventLoop& loop, QueryPipeline& pipeline,
                             int fd, uint64_t id, const sockaddr_storage& peer, socklen_t peer_len,
                             ssl_ctx_st* tls)
    : owner_(owner),
      shared_(owner.shared()),
      loop_(loop),
      pipeline_(pipeline),
      fd_(fd),
      id_(id),
      peer_(peer),
      peer_len_(peer_len),
      in_(kReadChunk) {
    if (tls != nullptr) tls_ = std::make_unique<TlsStream>(fd, tls);
}

TcpConnection::~TcpConnection() {
    loop_.cancel_timer(timer_);
    loop_.cancel_timer(buffered_timer_);
    if (!closed_) {
        loop_.remove(registration_);  // nothing, if registration failed
        close(fd_);
        shared_.queued_bytes.fetch_sub(unsent(), std::memory_order_relaxed);
    }
}

bool TcpConnection::register_with_loop() {
    if (tls_ && !tls_->usable()) return false;
    interest_ = EPOLLIN;
    if (!loop_.add(fd_, interest_, this, registration_)) return false;
    idle_since_ms_ = loop_.now_ms();
    // The handshake is held to the read timeout as a query is: a client that starts one and
    // never finishes it keeps nothing open for longer.
    if (tls_) partial_since_ms_ = idle_since_ms_;
    reschedule();
    return true;
}

void TcpConnection::reschedule() {
    if (closed_) return;
    const TcpLimits& limits = owner_.limits();
    const uint64_t now = loop_.now_ms();
    uint64_t at = UINT64_MAX;
    if (partial_since_ms_ != 0) at = std::min(at, partial_since_ms_ + limits.read_timeout_ms);
    if (write_blocked_since_ != 0) {
        at = std::min(at, write_blocked_since_ + limits.idle_timeout_ms);
    }
    if (pending_ == 0 && unsent() == 0 && partial_since_ms_ == 0) {
        at = std::min(at, idle_since_ms_ + limits.idle_timeout_ms);
    } else if (at == UINT64_MAX) {
        // Waiting for answers from upstream: look again an idle period from now.
        at = now + limits.idle_timeout_ms;
    }
    if (timer_ != EventLoop::kNoTimer && timer_at_ <= at) return;  // it fires early enough
    loop_.cancel_timer(timer_);
    timer_at_ = at;
    timer_ = loop_.add_timer(at, [this] {
        timer_ = EventLoop::kNoTimer;
        on_timer();
    });
}

void TcpConnection::on_timer() {
    const TcpLimits& limits = owner_.limits();
    const uint64_t now = loop_.now_ms();
    const bool query_too_slow =
        partial_since_ms_ != 0 && now >= partial_since_ms_ + limits.read_timeout_ms;
    const bool not_reading =
        write_blocked_since_ != 0 && now >= write_blocked_since_ + limits.idle_timeout_ms;
    const bool idle = pending_ == 0 && unsent() == 0 && partial_since_ms_ == 0 &&
                      now >= idle_since_ms_ + limits.idle_timeout_ms;
    if (query_too_slow || not_reading || idle) {
        if (tls_ && !tls_->handshake_done() && owner_.counters() != nullptr) {
            bump(owner_.counters()->dot_handshake_failures);  // it did not finish in time
        }
        close_connection();
        return;
    }
    reschedule();
}

void TcpConnection::on_event(uint32_t events) {
    if (closed_) return;
    if (events & (EPOLLERR | EPOLLHUP)) {
        close_connection();
        return;
    }
    if (tls_ && !tls_->handshake_done()) {
        if (!continue_handshake() || !tls_->handshake_done()) return;
        events |= EPOLLIN;  // the client's first query may have come with its Finished
    }
    const bool read_waited = tls_read_wants_write_ && (events & EPOLLOUT);
    const bool write_waited = tls_write_wants_read_ && (events & EPOLLIN);
    tls_read_wants_write_ = tls_write_wants_read_ = false;
    if ((events & EPOLLOUT) || write_waited) write_and_resume();
    if (!closed_ && ((events & EPOLLIN) || read_waited)) read_queries();
    if (!closed_) update_interest();
}

bool TcpConnection::continue_handshake() {
    WorkerCounters* counters = owner_.counters();
    switch (tls_->handshake()) {
        case TlsStream::Io::Done:
            partial_since_ms_ = 0;
            idle_since_ms_ = loop_.now_ms();
            if (counters != nullptr) {
                bump(counters->dot_handshakes);
                if (tls_->resumed()) bump(counters->dot_resumed);
            }
            reschedule();
            return true;
        case TlsStream::Io::WantRead:
            if (interest_ != EPOLLIN) loop_.modify(registration_, interest_ = EPOLLIN);
            return true;
        case TlsStream::Io::WantWrite:
            if (interest_ != EPOLLOUT) loop_.modify(registration_, interest_ = EPOLLOUT);
            return true;
        default:
            if (counters != nullptr) bump(counters->dot_handshake_failures);
            close_connection();
            return false;
    }
}

ssize_t TcpConnection::receive(uint8_t* buffer, size_t size) {
    if (!tls_) return recv(fd_, buffer, size, 0);
    size_t moved = 0;
    switch (tls_->read(buffer, size, moved)) {
        case TlsStream::Io::Done:
            return static_cast<ssize_t>(moved);
        case TlsStream::Io::Closed:
            return 0;
        case TlsStream::Io::WantWrite:
            tls_read_wants_write_ = true;
            [[fallthrough]];
        case TlsStream::Io::WantRead:
            errno = EAGAIN;
            return -1;
        default:
            errno = ECONNRESET;
            return -1;
    }
}

ssize_t TcpConnection::transmit(const uint8_t* data, size_t size) {
    if (!tls_) return send(fd_, data, size, MSG_NOSIGNAL);
    size_t moved = 0;
    switch (tls_->write(data, size, moved)) {
        case TlsStream::Io::Done:
            return static_cast<ssize_t>(moved);
        case TlsStream::Io::WantRead:
            tls_write_wants_read_ = true;
            [[fallthrough]];
        case TlsStream::Io::WantWrite:
            errno = EAGAIN;
            return -1;
        default:
            errno = ECONNRESET;
            return -1;
    }
}

void TcpConnection::read_queries() {
    if (write_shut_) {
        discard_until_eof();
        return;
    }
    for (int round = 0; round < 4 && !closed_; ++round) {
        if (in_.size() - in_length_ < kReadChunk / 2) in_.resize(in_length_ + kReadChunk);
        const ssize_t n = receive(in_.data() + in_length_, in_.size() - in_length_);
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
        process_buffer();
        if (pending_ >= kMaxPendingPerConnection || unsent() > kReadPauseBytes) break;
    }
    if (!closed_) write_and_resume();
}

void TcpConnection::write_and_resume() {
    // Answers drained: complete queries held back for them go on now (RFC 7766 §6.2.1.1 lets
    // a server pause a connection's queries, not drop them). Bounded: each round handles at
    // least one query of what was already read.
    for (int round = 0; round < 64 && !closed_; ++round) {
        flush();
        if (closed_ || in_length_ < 2 || unsent() > kReadPauseBytes ||
            pending_ >= kMaxPendingPerConnection) {
            return;
        }
        const size_t before = in_length_;
        process_buffer();
        if (in_length_ == before) return;  // nothing complete to handle
    }
}

void TcpConnection::process_buffer() {
    // Re-entry (an answer delivered while a query of this buffer is being handled) must not
    // handle the same bytes twice: the outer call's loop goes on with what is left.
    if (processing_ || closed_) return;
    processing_ = true;
    thread_local std::vector<uint8_t> answer(kMaxAnswer);
    size_t offset = 0;
    bool complete_waiting = false;
    while (!closed_ && in_length_ - offset >= 2) {
        const size_t length = dns::read_u16(in_.data() + offset);
        if (length < dns::kHeaderSize || length > kMaxQueryLength) {
            processing_ = false;
            close_connection();
            return;
        }
        if (in_length_ - offset < 2 + length) break;
        if (pending_ >= kMaxPendingPerConnection || unsent() > kReadPauseBytes) {
            complete_waiting = true;  // held back until answers drain, not the client's fault
            break;
        }
        ClientOrigin origin;
        origin.transport = tls_ ? Transport::Tls : Transport::Tcp;
        origin.tcp_connection = id_;
        origin.peer = reinterpret_cast<const sockaddr*>(&peer_);
        origin.peer_len = peer_len_;
        const HandleResult result =
            pipeline_.handle(dns::Bytes(in_.data() + offset + 2, length), origin, answer);
        offset += 2 + length;
        idle_since_ms_ = loop_.now_ms();
        if (result.pending) ++pending_;
        if (result.reply_length > 0) {
            queue(std::span<const uint8_t>(answer.data(), result.reply_length));
        }
    }
    processing_ = false;
    if (closed_) return;
    if (offset > 0) {
        std::memmove(in_.data(), in_.data() + offset, in_length_ - offset);
        in_length_ -= offset;
    }
    if (in_length_ == 0 || complete_waiting) {
        partial_since_ms_ = 0;
    } else if (offset > 0 || partial_since_ms_ == 0) {
        partial_since_ms_ = loop_.now_ms();  // a new query has begun
    }
    reschedule();
}

bool TcpConnection::queue(std::span<const uint8_t> answer) {
    const size_t bytes = 2 + answer.size();
    const size_t total = shared_.queued_bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes;
    if (unsent() + bytes > kMaxUnsentBytes || total > kMaxQueuedBytesTotal) {
        // A client that does not read its answers: it may not hold the daemon's memory.
        shared_.queued_bytes.fetch_sub(bytes, std::memory_order_relaxed);
        close_connection();
        return false;
    }
    const size_t at = out_.size();
    out_.resize(at + bytes);
    dns::write_u16(out_.data() + at, static_cast<uint16_t>(answer.size()));
    std::memcpy(out_.data() + at + 2, answer.data(), answer.size());
    idle_since_ms_ = loop_.now_ms();
    return true;
}

void TcpConnection::send_answer(std::span<const uint8_t> answer) {
    if (closed_) return;
    if (pending_ > 0) --pending_;
    if (!queue(answer)) return;
    if (processing_) return;  // the running process_buffer() writes it when it is done
    write_and_resume();       // a pending slot freed: held-back queries may go on
    if (!closed_) update_interest();
}

void TcpConnection::flush() {
    const size_t before = unsent();
    while (out_offset_ < out_.size()) {
        const ssize_t n = transmit(out_.data() + out_offset_, out_.size() - out_offset_);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) break;
            if (errno == EINTR) continue;
            close_connection();
            return;
        }
        out_offset_ += static_cast<size_t>(n);
    }
    const size_t written = before - unsent();
    shared_.queued_bytes.fetch_sub(written, std::memory_order_relaxed);
    if (out_offset_ == out_.size()) {
        out_.clear();
        out_offset_ = 0;
        write_blocked_since_ = 0;
    } else if (write_blocked_since_ == 0) {
        // From the moment answers start to wait, the client has one idle period to take them
        // all: reading a few bytes now and then does not hold the daemon's memory for longer.
        write_blocked_since_ = loop_.now_ms();
    }
    reschedule();
}

void TcpConnection::drain() {
    if (closed_) return;
    draining_ = true;
    update_interest();
}

void TcpConnection::discard_until_eof() {
    // Bounded per event like read_queries(); the idle timer and the worker's drain deadline
    // bound how long a client that never closes keeps the connection.
    for (int round = 0; round < 4; ++round) {
        const ssize_t n = receive(in_.data(), in_.size());
        if (n > 0) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return;
        close_connection();  // EOF (or an error): nothing unread is left to cause a reset
        return;
    }
}

void TcpConnection::update_interest() {
    if (peer_closed_ && pending_ == 0 && out_.empty()) {
        close_connection();  // the client sent everything it will: nothing unread
        return;
    }
    if (draining_ && pending_ == 0 && out_.empty()) {
        // Closing now would lose answers: a query the client pipelined after the drain began
        // sits unread, and close() with unread bytes sends RST, on which the kernel drops
        // what it has not yet sent. The FIN follows the answers instead; the client's FIN
        // (or the idle timer) then closes.
        if (!write_shut_) {
            write_shut_ = true;
            in_length_ = 0;
            partial_since_ms_ = 0;
            if (tls_) tls_->shutdown();  // close_notify before the FIN
            if (shutdown(fd_, SHUT_WR) != 0) {
                close_connection();
                return;
            }
            reschedule();
        }
        if (interest_ != EPOLLIN) {
            interest_ = EPOLLIN;
            loop_.modify(registration_, interest_);
        }
        return;
    }
    uint32_t wanted = 0;
    const bool can_read = !peer_closed_ && !draining_ && pending_ < kMaxPendingPerConnection &&
                          unsent() <= kReadPauseBytes;
    if (can_read) wanted |= EPOLLIN;
    if (!out_.empty()) wanted |= EPOLLOUT;
    if (tls_read_wants_write_) wanted |= EPOLLOUT;
    if (tls_write_wants_read_) wanted |= EPOLLIN;
    // Plaintext TLS already decrypted raises no event: a reader that paused with some left
    // reads it on the loop's next turn.
    if (can_read && tls_ && tls_->buffered() > 0 && buffered_timer_ == EventLoop::kNoTimer) {
        buffered_timer_ = loop_.add_timer(0, [this] {
            buffered_timer_ = EventLoop::kNoTimer;
            if (closed_) return;
            read_queries();
            if (!closed_) update_interest();
        });
    }
    if (wanted != interest_) {
        interest_ = wanted;
        loop_.modify(registration_, wanted);
    }
}

void TcpConnection::close_connection() {
    if (closed_) return;
    closed_ = true;
    loop_.cancel_timer(timer_);
    loop_.cancel_timer(buffered_timer_);
    loop_.remove(registration_);
    close(fd_);
    shared_.queued_bytes.fetch_sub(unsent(), std::memory_order_relaxed);
    out_.clear();
    out_offset_ = 0;
    owner_.release(id_);
}

TcpConnections::TcpConnections(EventLoop& loop, QueryPipeline& pipeline, TcpShared& shared)
    : loop_(loop), pipeline_(pipeline), shared_(shared) {}

bool TcpConnections::adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len,
                           ssl_ctx_st* tls) {
    const auto* peer_sa = reinterpret_cast<const sockaddr*>(&peer);
    if (shared_.connections.fetch_add(1, std::memory_order_relaxed) >= limits_.max_connections) {
        shared_.connections.fetch_sub(1, std::memory_order_relaxed);
        close(fd);
        return false;
    }
    if (!shared_.per_client.acquire(peer_sa, limits_.max_per_client)) {
        shared_.connections.fetch_sub(1, std::memory_order_relaxed);
        close(fd);
        return false;
    }
    uint64_t id;
    std::unique_ptr<TcpConnection>* slot = connections_.add(id);
    if (slot != nullptr) {
        *slot =
            std::make_unique<TcpConnection>(*this, loop_, pipeline_, fd, id, peer, peer_len, tls);
        if ((*slot)->register_with_loop()) return true;
        connections_.remove(id);  // destroys the connection, which closes fd
    } else {
        close(fd);
    }
    shared_.per_client.release(peer_sa);
    shared_.connections.fetch_sub(1, std::memory_order_relaxed);
    return false;
}

TcpConnection* TcpConnections::find(uint64_t id) {
    std::unique_ptr<TcpConnection>* slot = connections_.find(id);
    return slot != nullptr ? slot->get() : nullptr;
}

void TcpConnections::release(uint64_t id) {
    std::unique_ptr<TcpConnection>* slot = connections_.find(id);
    if (slot == nullptr) return;
    shared_.per_client.release(reinterpret_cast<const sockaddr*>(&(*slot)->peer()));
    shared_.connections.fetch_sub(1, std::memory_order_relaxed);
    // The connection may be on the call stack (it closed itself): destroy it on the next turn.
    graveyard_.push_back(std::move(*slot));
    connections_.remove(id);  // find() no longer returns it
    if (graveyard_.size() == 1) {
        loop_.add_timer(0, [this] { graveyard_.clear(); });
    }
}

void TcpConnections::drain_all() {
    // A connection that closes leaves the table: not while walking it.
    std::vector<uint64_t> ids;
    connections_.for_each([&](uint64_t id, std::unique_ptr<TcpConnection>&) { ids.push_back(id); });
    for (uint64_t id : ids) {
        if (TcpConnection* c = find(id)) c->drain();
    }
}

void TcpConnections::close_all() {
    connections_.for_each([this](uint64_t, std::unique_ptr<TcpConnection>& c) {
        if (c && !c->closed()) {
            shared_.per_client.release(reinterpret_cast<const sockaddr*>(&c->peer()));
            shared_.connections.fetch_sub(1, std::memory_order_relaxed);
        }
    });
    connections_.clear();
    graveyard_.clear();
}

}  // namespace nscache::server
