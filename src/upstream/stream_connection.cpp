// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/stream_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <utility>

#include "common/clock.h"
#include "common/log.h"
#include "common/random.h"

namespace nscache::upstream {
namespace {

// Queries waiting for their answer on one connection at once.
constexpr size_t kMaxLive = 1024;
// Abandoned IDs a socket may hold before the next query moves to a fresh one: a quarter of
// the live limit, so the table never comes near full of queries nobody waits for.
constexpr size_t kRetireAbandoned = kMaxLive / 4;
// IDs one socket holds at most, live and quarantined. Far below the 65,536 IDs: a random free
// one is found at once. Reached only if queries give up faster than the socket can be
// replaced (inside an answer's delivery it is not).
constexpr size_t kMaxPending = 4 * kMaxLive;
// Draining sockets per connection; past this the oldest closes (its queries go again).
constexpr size_t kMaxDraining = 4;
constexpr uint64_t kConnectTimeoutMs = 3000;
constexpr uint64_t kFirstBackoffMs = 50;
constexpr uint64_t kMaxBackoffMs = 5000;
// Reads per readiness event before other sockets get a turn.
constexpr int kMaxReadsPerEvent = 32;
constexpr size_t kReadBuffer = 2 + 65535;

}  // namespace

StreamConnection::StreamConnection(EventLoop& loop, WorkerCounters& counters,
                                   const SocketAddress& address, const TlsClient* tls, TlsPeer peer,
                                   StreamOptions options)
    : loop_(loop),
      counters_(counters),
      address_(address),
      tls_(tls),
      peer_(std::move(peer)),
      options_(options) {}

StreamConnection::~StreamConnection() {
    draining_.clear();  // their SSLs store sessions into our session_
    loop_.cancel_timer(reap_timer_);
    loop_.cancel_timer(timer_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (session_ != nullptr) SSL_SESSION_free(session_);
    if (fd_ >= 0) {
        loop_.forget(registration_);
        close(fd_);
    }
}

size_t StreamConnection::outstanding() const {
    size_t n = live_;
    for (const auto& d : draining_) n += d->live_;
    return n;
}

bool StreamConnection::send(const dns::UpstreamQuestion& question, Waiter* waiter, uint16_t& id) {
    if (abandoned() >= kRetireAbandoned && !delivering_) {
        if (state_ == State::Open) {
            retire_socket();
        } else {
            compact();
        }
    }
    if (live_ >= kMaxLive || pending_.size() >= kMaxPending) return false;
    for (int tries = 0;; ++tries) {
        if (tries == 64) return false;
        id = secure_random_u16();
        if (pending_.find(id) == pending_.end()) break;
    }
    append_frame(question, id);
    pending_[id] = Pending{waiter, question, state_ == State::Open ? monotonic_us() : 0};
    ++live_;
    bump(counters_.upstream_queries);
    switch (state_) {
        case State::Closed:
            connect_now();
            break;
        case State::Open:
            loop_.cancel_timer(timer_);  // the idle timer
            flush();
            break;
        case State::Backoff:  // sent when the backoff ends
        case State::Connecting:
        case State::Handshaking:
            break;
    }
    return true;
}

void StreamConnection::append_frame(const dns::UpstreamQuestion& question, uint16_t id) {
    uint8_t query[2 + dns::kMaxPaddedUpstreamQuery];
    const std::span<uint8_t> body(query + 2, dns::kMaxPaddedUpstreamQuery);
    size_t n = dns::write_upstream_query(question, id, options_.edns_buffer_size, body);
    if (tls_ != nullptr) n = dns::pad_upstream_query(body, n);  // RFC 8467 §4.1
    dns::write_u16(query, static_cast<uint16_t>(n));
    wbuf_.insert(wbuf_.end(), query, query + 2 + n);
}

void StreamConnection::cancel(uint16_t id, const Waiter* waiter) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second.waiter != waiter) {
        // A waiter has one query on a connection at most: it may be on a draining socket.
        for (auto& d : draining_) d->cancel(id, waiter);
        return;
    }
    it->second.waiter = nullptr;
    bump(counters_.upstream_stream_abandoned);
    if (--live_ == 0 && state_ == State::Open) arm_idle_timer();
}

void StreamConnection::reset() {
    if (state_ == State::Open || state_ == State::Connecting || state_ == State::Handshaking) {
        drop(false);
    }
    // The waiter that saw the broken answer cannot tell which socket it came on.
    for (auto& d : draining_) d->reset();
}

void StreamConnection::compact() {
    // Before Open nothing of wbuf_ went out (flush runs only when open), so no answer to an
    // abandoned ID can come: free them, and frame again only the queries still wanted.
    wbuf_.clear();
    woff_ = 0;
    std::erase_if(pending_, [](const auto& item) { return item.second.waiter == nullptr; });
    for (const auto& [id, p] : pending_) append_frame(p.question, id);
}

void StreamConnection::retire_socket() {
    auto old =
        std::make_unique<StreamConnection>(loop_, counters_, address_, tls_, peer_, options_);
    old->parent_ = this;
    old->state_ = state_;
    old->fd_ = std::exchange(fd_, -1);
    old->ssl_ = std::exchange(ssl_, nullptr);  // its app data still points at our session_
    old->want_write_ = std::exchange(want_write_, false);
    old->pending_.swap(pending_);
    old->live_ = std::exchange(live_, 0);
    old->wbuf_.swap(wbuf_);
    old->woff_ = std::exchange(woff_, 0);
    old->rbuf_.swap(rbuf_);
    old->rhave_ = std::exchange(rhave_, 0);
    loop_.cancel_timer(timer_);  // the idle timer, if any: nothing is left here
    loop_.remove(registration_);
    interest_ = 0;
    ++generation_;
    state_ = State::Closed;
    bump(counters_.upstream_stream_replaced);
    StreamConnection& d = *old;
    draining_.push_back(std::move(old));
    uint32_t interest = EPOLLIN;
    if (d.want_write_ || d.woff_ < d.wbuf_.size()) interest |= EPOLLOUT;
    if (!loop_.add(d.fd_, interest, &d, d.registration_)) {
        d.timer_ = loop_.add_timer(loop_.now_ms(), [&d] {
            d.timer_ = EventLoop::kNoTimer;
            d.drop(true);
        });
    } else {
        d.interest_ = interest;
        if (d.live_ == 0) d.arm_idle_timer();  // closes it at once
    }
    // Too many still draining: the oldest goes, from the loop (never inside send()).
    size_t still = 0;
    for (auto& x : draining_) still += x->state_ != State::Closed && !x->closing_;
    for (auto& x : draining_) {
        if (still <= kMaxDraining) break;
        if (x->state_ == State::Closed || x->closing_) continue;
        x->closing_ = true;
        --still;
        StreamConnection* victim = x.get();
        victim->loop_.cancel_timer(victim->timer_);
        victim->timer_ = loop_.add_timer(loop_.now_ms(), [victim] {
            victim->timer_ = EventLoop::kNoTimer;
            victim->drop(false);
        });
    }
}

void StreamConnection::reap_soon() {
    if (reap_timer_ != EventLoop::kNoTimer) return;
    reap_timer_ = loop_.add_timer(loop_.now_ms(), [this] {
        reap_timer_ = EventLoop::kNoTimer;
        std::erase_if(draining_, [](const auto& d) { return d->state_ == State::Closed; });
    });
}

void StreamConnection::fail_soon() {
    loop_.cancel_timer(timer_);
    timer_ = loop_.add_timer(loop_.now_ms(), [this] {
        timer_ = EventLoop::kNoTimer;
        drop(true);
    });
}

void StreamConnection::connect_now() {
    fd_ = socket(address_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        fail_soon();
        return;
    }
    // Queries are small and each is waited for: no Nagle delay between them.
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!loop_.add(fd_, EPOLLOUT, this, registration_)) {
        close(fd_);
        fd_ = -1;
        fail_soon();
        return;
    }
    interest_ = EPOLLOUT;
    if (rbuf_.size() < kReadBuffer) rbuf_.resize(kReadBuffer);
    rhave_ = 0;
    state_ = State::Connecting;
    loop_.cancel_timer(timer_);
    timer_ = loop_.add_timer(loop_.now_ms() + kConnectTimeoutMs, [this] {
        timer_ = EventLoop::kNoTimer;
        log_warning_limited("upstream %s: connection not ready in %llu ms",
                            address_.to_string().c_str(),
                            static_cast<unsigned long long>(kConnectTimeoutMs));
        drop(true);
    });
    if (::connect(fd_, address_.sa(), address_.length) != 0 && errno != EINPROGRESS) {
        fail_soon();
        return;
    }
    bump(counters_.upstream_connections);
    // Loopback may connect at once; the socket is writable then too, so wait for the event.
}

void StreamConnection::on_connected() {
    if (tls_ == nullptr) {
        after_open();
        return;
    }
    ssl_ = tls_->new_session(fd_, peer_);
    if (ssl_ == nullptr) {
        drop(true);
        return;
    }
    // The session ticket callback (tls_client.cpp) stores into this slot.
    SSL_set_app_data(ssl_, &session_);
    if (session_ != nullptr) SSL_set_session(ssl_, session_);
    state_ = State::Handshaking;
    on_handshake();
}

void StreamConnection::on_handshake() {
    const int r = SSL_connect(ssl_);
    if (r == 1) {
        std::string why;
        if (!TlsClient::authenticated(ssl_, peer_, why)) {
            bump(counters_.upstream_tls_auth_failures);
            if (tls_->auth() == TlsAuth::Strict) {
                log_warning_limited("upstream %s: TLS authentication failed (%s); not used",
                                    address_.to_string().c_str(), why.c_str());
                drop(true);
                return;
            }
            log_warning_limited(
                "upstream %s: TLS authentication failed (%s); used unauthenticated"
                " (opportunistic)",
                address_.to_string().c_str(), why.c_str());
        }
        bump(counters_.upstream_tls_handshakes);
        if (SSL_session_reused(ssl_)) bump(counters_.upstream_tls_resumed);
        after_open();
        return;
    }
    switch (SSL_get_error(ssl_, r)) {
        case SSL_ERROR_WANT_READ:
            want_write_ = false;
            update_interest();
            return;
        case SSL_ERROR_WANT_WRITE:
            want_write_ = true;
            update_interest();
            return;
        default:
            log_warning_limited("upstream %s: TLS handshake failed", address_.to_string().c_str());
            drop(true);
            return;
    }
}

void StreamConnection::after_open() {
    state_ = State::Open;
    failures_ = 0;
    want_write_ = false;
    loop_.cancel_timer(timer_);  // the connect deadline
    if (!flush()) return;
    if (live_ == 0) arm_idle_timer();
}

void StreamConnection::arm_idle_timer() {
    loop_.cancel_timer(timer_);
    // A draining socket closes as soon as no query waits on it.
    const uint64_t wait_ms = parent_ != nullptr ? 0 : options_.idle_timeout_ms;
    timer_ = loop_.add_timer(loop_.now_ms() + wait_ms, [this] {
        timer_ = EventLoop::kNoTimer;
        if (live_ == 0 && state_ == State::Open) drop(false);
    });
}

void StreamConnection::update_interest() {
    if (fd_ < 0) return;
    uint32_t want = 0;
    if (state_ == State::Connecting) {
        want = EPOLLOUT;
    } else {
        want = EPOLLIN;
        if (want_write_ || (state_ == State::Open && woff_ < wbuf_.size())) want |= EPOLLOUT;
    }
    if (want != interest_) {
        loop_.modify(registration_, want);
        interest_ = want;
    }
}

ssize_t StreamConnection::raw_write(const uint8_t* buf, size_t len) {
    if (ssl_ == nullptr) {
        const ssize_t n = ::send(fd_, buf, len, MSG_NOSIGNAL);
        return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? -2 : n;
    }
    const int n = SSL_write(ssl_, buf, static_cast<int>(len));
    if (n > 0) return n;
    switch (SSL_get_error(ssl_, n)) {
        case SSL_ERROR_WANT_WRITE:
        case SSL_ERROR_WANT_READ:
            errno = EAGAIN;
            return -1;
        default:
            return -2;
    }
}

ssize_t StreamConnection::raw_read(uint8_t* buf, size_t len) {
    if (ssl_ == nullptr) {
        const ssize_t n = recv(fd_, buf, len, 0);
        return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? 0 : n;
    }
    const int n = SSL_read(ssl_, buf, static_cast<int>(len));
    if (n > 0) return n;
    switch (SSL_get_error(ssl_, n)) {
        case SSL_ERROR_WANT_READ:
            errno = EAGAIN;
            return -1;
        case SSL_ERROR_WANT_WRITE:
            want_write_ = true;
            errno = EAGAIN;
            return -1;
        default:  // close_notify, a reset or a broken record: the connection is over
            return 0;
    }
}

bool StreamConnection::flush() {
    while (woff_ < wbuf_.size()) {
        const ssize_t n = raw_write(wbuf_.data() + woff_, wbuf_.size() - woff_);
        if (n == -1) break;  // full: EPOLLOUT says when to go on
        if (n < 0) {
            fail_soon();
            return false;
        }
        woff_ += static_cast<size_t>(n);
    }
    if (woff_ == wbuf_.size()) {
        wbuf_.clear();
        woff_ = 0;
    }
    update_interest();
    return true;
}

void StreamConnection::on_event(uint32_t events) {
    switch (state_) {
        case State::Connecting: {
            int error = 0;
            socklen_t len = sizeof error;
            getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len);
            if (error != 0 || (events & (EPOLLERR | EPOLLHUP))) {
                drop(true);
                return;
            }
            on_connected();
            return;
        }
        case State::Handshaking:
            on_handshake();
            return;
        case State::Open: {
            const uint64_t generation = generation_;
            want_write_ = false;
            read_answers();
            if (generation == generation_ && state_ == State::Open) flush();
            return;
        }
        case State::Closed:
        case State::Backoff:
            return;
    }
}

void StreamConnection::read_answers() {
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
        const ssize_t n = raw_read(rbuf_.data() + rhave_, rbuf_.size() - rhave_);
        if (n < 0) return;  // nothing more now
        if (n == 0) {
            drop(false);  // closed by the server: the queries on it are sent again
            return;
        }
        rhave_ += static_cast<size_t>(n);
        if (!process_frames()) return;
    }
}

bool StreamConnection::process_frames() {
    size_t off = 0;
    const uint64_t generation = generation_;
    while (rhave_ - off >= 2) {
        const size_t length = dns::read_u16(rbuf_.data() + off);
        if (length < dns::kHeaderSize) {
            drop(false);
            return false;
        }
        if (rhave_ - off < 2 + length) break;
        const dns::Bytes msg(rbuf_.data() + off + 2, length);
        off += 2 + length;
        const uint16_t id = dns::read_u16(msg.data());
        auto it = pending_.find(id);
        if (it == pending_.end()) {
            bump(counters_.dropped_mismatched);
            continue;
        }
        const Pending p = it->second;
        pending_.erase(it);
        if (p.waiter == nullptr) continue;  // its query ended meanwhile
        --live_;
        if (!dns::answers_question(msg, id, p.question)) {
            // Not the answer to what we asked on this ID: the stream is out of step.
            bump(counters_.dropped_mismatched);
            drop(false);
            p.waiter->on_stream_failed();
            return false;
        }
        const uint32_t rtt =
            p.sent_at_us == 0 ? 0 : static_cast<uint32_t>(monotonic_us() - p.sent_at_us);
        delivering_ = true;  // a query sent from the call must not move rbuf_ away
        p.waiter->on_stream_answer(msg, rtt);
        delivering_ = false;
        if (generation != generation_ || state_ != State::Open) return false;
    }
    if (off > 0) {
        std::memmove(rbuf_.data(), rbuf_.data() + off, rhave_ - off);
        rhave_ -= off;
    }
    if (live_ == 0 && timer_ == EventLoop::kNoTimer) arm_idle_timer();
    return true;
}

void StreamConnection::drop(bool failed) {
    loop_.cancel_timer(timer_);
    if (ssl_ != nullptr) {
        if (!failed && state_ == State::Open) SSL_shutdown(ssl_);  // close_notify, best effort
        SSL_free(ssl_);
        ssl_ = nullptr;
    }
    if (fd_ >= 0) {
        loop_.forget(registration_);
        close(fd_);
        fd_ = -1;
    }
    ++generation_;
    interest_ = 0;
    want_write_ = false;
    wbuf_.clear();
    woff_ = 0;
    rhave_ = 0;
    if (parent_ != nullptr) {
        // Draining: never reconnects; its queries go again on the parent's socket.
        if (failed) bump(counters_.upstream_connect_failures);
        state_ = State::Closed;
        rbuf_ = {};
        parent_->reap_soon();
    } else if (failed) {
        ++failures_;
        bump(counters_.upstream_connect_failures);
        const uint64_t backoff =
            std::min(kFirstBackoffMs << std::min<uint32_t>(failures_ - 1, 10), kMaxBackoffMs);
        state_ = State::Backoff;
        timer_ = loop_.add_timer(loop_.now_ms() + backoff, [this] {
            timer_ = EventLoop::kNoTimer;
            state_ = State::Closed;
            if (!pending_.empty()) connect_now();
        });
    } else {
        state_ = State::Closed;
    }
    // Everyone on the old connection hears of it; a waiter that sends again here queues on
    // the next connection (at once, or after the backoff).
    std::unordered_map<uint16_t, Pending> lost;
    lost.swap(pending_);
    live_ = 0;
    for (auto& [id, p] : lost) {
        if (p.waiter != nullptr) p.waiter->on_stream_failed();
    }
}

}  // namespace nscache::upstream
