// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/doh_connection.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/log.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {
namespace {

constexpr uint64_t kConnectTimeoutMs = 3000;
constexpr uint64_t kFirstBackoffMs = 50;
constexpr uint64_t kMaxBackoffMs = 5000;
constexpr int kMaxReadsPerEvent = 32;
constexpr size_t kReadChunk = 16 * 1024;
// nghttp2 output gathered per write pass: a few TLS records.
constexpr size_t kWriteBatch = 64 * 1024;
constexpr size_t kMaxAnswer = 65535;
constexpr size_t kMaxHeaderBytes = 16 * 1024;
// Before the server's SETTINGS come: RFC 9113 §6.5.2 recommends no fewer than 100.
constexpr uint32_t kAssumedConcurrentStreams = 100;
constexpr std::string_view kDnsMessage = "application/dns-message";
const unsigned char kAlpnH2[] = {2, 'h', '2'};

std::string authority_of(const UpstreamServer& server) {
    std::string host = server.tls_peer.auth_name;
    if (host.empty()) {
        host = server.address.family() == AF_INET6 ? "[" + server.tls_peer.ip + "]"
                                                   : server.tls_peer.ip;
    }
    if (server.address.port() != 443) host += ":" + std::to_string(server.address.port());
    return host;
}

nghttp2_nv header(std::string_view name, std::string_view value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(),
                      NGHTTP2_NV_FLAG_NONE};  // nghttp2 copies: the content-length text is a local
}

}  // namespace

// Each callback runs inside nghttp2_session_mem_recv or mem_send: it records what happened and
// never calls a waiter (deliver() does, once nghttp2 has returned).
struct DohConnection::Callbacks {
    static DohConnection& self(void* user) { return *static_cast<DohConnection*>(user); }

    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                         size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                         void* user) {
        if (frame->hd.type != NGHTTP2_HEADERS) return 0;
        Pending* p = self(user).pending_of(frame->hd.stream_id);
        if (p == nullptr) return 0;
        p->header_bytes += namelen + valuelen + 32;  // RFC 9113 §6.5.2's accounting
        if (p->header_bytes > kMaxHeaderBytes) {
            p->broken = true;
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;  // resets the stream
        }
        const std::string_view n(reinterpret_cast<const char*>(name), namelen);
        const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
        if (n == ":status") {
            int status = 0;
            for (char c : v) {
                if (c < '0' || c > '9' || status > 999) return 0;
                status = status * 10 + (c - '0');
            }
            // A 1xx is informational: the final status follows.
            if (status >= 200) p->status = status;
        } else if (n == "content-type") {
            // Parameters are allowed ("application/dns-message; charset=..." is odd but legal).
            const std::string_view type = v.substr(0, v.find(';'));
            p->content_type_ok = type.size() == kDnsMessage.size() &&
                                 std::equal(type.begin(), type.end(), kDnsMessage.begin(),
                                            [](char a, char b) { return (a | 0x20) == b; });
        }
        return 0;
    }

    static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t stream, const uint8_t* data,
                             size_t len, void* user) {
        Pending* p = self(user).pending_of(stream);
        if (p == nullptr || p->broken) return 0;
        if (p->answer.size() + len > kMaxAnswer) {
            p->broken = true;
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, stream, NGHTTP2_CANCEL);
            return 0;
        }
        p->answer.insert(p->answer.end(), data, data + len);
        return 0;
    }

    static int on_stream_close(nghttp2_session*, int32_t stream, uint32_t error_code, void* user) {
        self(user).on_stream_closed(stream, error_code);
        return 0;
    }

    static int on_frame_recv(nghttp2_session*, const nghttp2_frame* frame, void* user) {
        DohConnection& c = self(user);
        if (frame->hd.type == NGHTTP2_GOAWAY && !c.going_away_) {
            // nghttp2 closes the streams above last-stream-id itself (REFUSED_STREAM): those
            // are sent again on the next connection.
            c.going_away_ = true;
            bump(c.counters_.upstream_doh_goaway);
            log_info("upstream %s: GOAWAY (error code %u); reconnecting for new queries",
                     c.address_.to_string().c_str(), frame->goaway.error_code);
        }
        return 0;
    }

    static ssize_t read_body(nghttp2_session*, int32_t stream, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source*, void* user) {
        Pending* p = self(user).pending_of(stream);
        if (p == nullptr) return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        const size_t n = std::min(length, p->body.size() - p->body_off);
        std::memcpy(buf, p->body.data() + p->body_off, n);
        p->body_off += n;
        if (p->body_off == p->body.size()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }
};

DohConnection::DohConnection(EventLoop& loop, WorkerCounters& counters,
                             const UpstreamServer& server, const TlsClient& tls,
                             StreamOptions options)
    : loop_(loop),
      counters_(counters),
      address_(server.address),
      path_(server.path),
      authority_(authority_of(server)),
      tls_(tls),
      peer_(server.tls_peer),
      options_(options) {}

DohConnection::~DohConnection() {
    loop_.cancel_timer(timer_);
    if (h2_ != nullptr) nghttp2_session_del(h2_);
    if (ssl_ != nullptr) SSL_free(ssl_);
    if (session_ != nullptr) SSL_SESSION_free(session_);
    if (fd_ >= 0) {
        loop_.forget(registration_);
        close(fd_);
    }
}

DohConnection::Pending* DohConnection::pending_of(int32_t stream) {
    auto s = streams_.find(stream);
    if (s == streams_.end()) return nullptr;
    auto it = pending_.find(s->second);
    return it == pending_.end() ? nullptr : &it->second;
}

bool DohConnection::send(const dns::UpstreamQuestion& question, Waiter* waiter, uint16_t& id) {
    if (pending_.size() >= kMaxLive) return false;
    // Handles name queries for cancel() only; any free one does (the wire carries ID 0).
    for (int tries = 0;; ++tries) {
        if (tries == 64) return false;
        id = next_handle_++;
        if (id != 0 && pending_.find(id) == pending_.end()) break;
    }
    Pending& p = pending_[id];
    p.waiter = waiter;
    p.question = question;
    p.body.resize(dns::kMaxPaddedUpstreamQuery);
    size_t n = dns::write_upstream_query(question, 0, options_.edns_buffer_size, p.body);
    n = dns::pad_upstream_query(p.body, n);  // RFC 8467 §4.1
    p.body.resize(n);
    bump(counters_.upstream_queries);
    switch (state_) {
        case State::Closed:
            connect_now();
            break;
        case State::Open:
            if (going_away_) break;      // sent on the next connection
            loop_.cancel_timer(timer_);  // the idle timer
            submit(id, p);
            flush();
            break;
        case State::Backoff:
        case State::Connecting:
        case State::Handshaking:
            break;
    }
    return true;
}

void DohConnection::submit(uint16_t handle, Pending& p) {
    const std::string length = std::to_string(p.body.size());
    const nghttp2_nv headers[] = {
        header(":method", "POST"),           header(":scheme", "https"),
        header(":authority", authority_),    header(":path", path_),
        header("content-type", kDnsMessage), header("accept", kDnsMessage),
        header("content-length", length),
    };
    nghttp2_data_provider body{};
    body.read_callback = Callbacks::read_body;
    p.body_off = 0;
    const int32_t stream = nghttp2_submit_request(
        h2_, nullptr, headers, sizeof headers / sizeof headers[0], &body, nullptr);
    if (stream < 0) {
        // Stream IDs used up (2^31 on one connection) or out of memory: this connection
        // takes no more, the next one will.
        going_away_ = true;
        return;
    }
    p.stream = stream;
    p.sent_at_us = monotonic_us();
    streams_[stream] = handle;
    bump(counters_.upstream_doh_streams);
}

void DohConnection::submit_queued() {
    for (auto& [handle, p] : pending_) {
        if (going_away_) return;
        if (p.stream < 0 && p.waiter != nullptr) submit(handle, p);
    }
}

void DohConnection::cancel(uint16_t id, const Waiter* waiter) {
    auto it = pending_.find(id);
    if (it == pending_.end() || it->second.waiter != waiter) return;
    bump(counters_.upstream_stream_abandoned);
    if (it->second.stream < 0) {
        pending_.erase(it);
    } else {
        // The entry goes when the stream closes; the reset tells the server to stop.
        it->second.waiter = nullptr;
        nghttp2_submit_rst_stream(h2_, NGHTTP2_FLAG_NONE, it->second.stream, NGHTTP2_CANCEL);
        if (state_ == State::Open) {
            // Not inside a delivery: flush from the loop, never from the waiter's call.
            if (timer_ == EventLoop::kNoTimer) {
                timer_ = loop_.add_timer(loop_.now_ms(), [this] {
                    timer_ = EventLoop::kNoTimer;
                    const uint64_t generation = generation_;
                    if (flush() && generation == generation_) maybe_finish_drain();
                });
            }
        }
    }
}

void DohConnection::reset() {
    if (state_ == State::Open || state_ == State::Connecting || state_ == State::Handshaking) {
        drop(false);
    }
}

void DohConnection::fail_soon() {
    loop_.cancel_timer(timer_);
    timer_ = loop_.add_timer(loop_.now_ms(), [this] {
        timer_ = EventLoop::kNoTimer;
        drop(true);
    });
}

void DohConnection::connect_now() {
    fd_ = socket(address_.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) {
        fail_soon();
        return;
    }
    const int one = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (!loop_.add(fd_, EPOLLOUT, this, registration_)) {
        close(fd_);
        fd_ = -1;
        fail_soon();
        return;
    }
    interest_ = EPOLLOUT;
    state_ = State::Connecting;
    going_away_ = false;
    loop_.cancel_timer(timer_);
    timer_ = loop_.add_timer(loop_.now_ms() + kConnectTimeoutMs, [this] {
        timer_ = EventLoop::kNoTimer;
        log_warning_limited("upstream %s: DoH connection not ready in %llu ms",
                            address_.to_string().c_str(),
                            static_cast<unsigned long long>(kConnectTimeoutMs));
        drop(true);
    });
    if (::connect(fd_, address_.sa(), address_.length) != 0 && errno != EINPROGRESS) {
        fail_soon();
        return;
    }
    bump(counters_.upstream_connections);
}

void DohConnection::on_connected() {
    ssl_ = tls_.new_session(fd_, peer_);
    if (ssl_ == nullptr || SSL_set_alpn_protos(ssl_, kAlpnH2, sizeof kAlpnH2) != 0) {
        drop(true);
        return;
    }
    SSL_set_app_data(ssl_, &session_);  // tls_client.cpp's ticket callback stores here
    if (session_ != nullptr) SSL_set_session(ssl_, session_);
    state_ = State::Handshaking;
    on_handshake();
}

void DohConnection::on_handshake() {
    const int r = SSL_connect(ssl_);
    if (r != 1) {
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
                log_warning_limited("upstream %s: TLS handshake failed (DoH)",
                                    address_.to_string().c_str());
                drop(true);
                return;
        }
    }
    std::string why;
    if (!TlsClient::authenticated(ssl_, peer_, why)) {
        bump(counters_.upstream_tls_auth_failures);
        if (tls_.auth() == TlsAuth::Strict) {
            log_warning_limited("upstream %s: TLS authentication failed (%s); not used",
                                address_.to_string().c_str(), why.c_str());
            drop(true);
            return;
        }
        log_warning_limited(
            "upstream %s: TLS authentication failed (%s); used unauthenticated (opportunistic)",
            address_.to_string().c_str(), why.c_str());
    }
    const unsigned char* alpn = nullptr;
    unsigned int alpn_len = 0;
    SSL_get0_alpn_selected(ssl_, &alpn, &alpn_len);
    if (alpn_len != 2 || std::memcmp(alpn, "h2", 2) != 0) {
        // RFC 8484 §5.2: HTTP/2 is the minimum; a server that does not speak it is not used.
        log_warning_limited("upstream %s: the server did not choose ALPN h2; not used",
                            address_.to_string().c_str());
        drop(true);
        return;
    }
    bump(counters_.upstream_tls_handshakes);
    if (SSL_session_reused(ssl_)) bump(counters_.upstream_tls_resumed);
    if (!start_session()) {
        drop(true);
        return;
    }
    after_open();
}

bool DohConnection::start_session() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_header_callback(callbacks, Callbacks::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Callbacks::on_data_chunk);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Callbacks::on_stream_close);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Callbacks::on_frame_recv);
    nghttp2_option* option = nullptr;
    if (nghttp2_option_new(&option) != 0) {
        nghttp2_session_callbacks_del(callbacks);
        return false;
    }
    nghttp2_option_set_peer_max_concurrent_streams(option, kAssumedConcurrentStreams);
    const int rv = nghttp2_session_client_new2(&h2_, callbacks, this, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    if (rv != 0) {
        h2_ = nullptr;
        return false;
    }
    // No server push (a DoH client has no use for it), and no streams the server may open.
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, 0},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderBytes},
    };
    return nghttp2_submit_settings(h2_, NGHTTP2_FLAG_NONE, settings,
                                   sizeof settings / sizeof settings[0]) == 0;
}

void DohConnection::after_open() {
    state_ = State::Open;
    failures_ = 0;
    want_write_ = false;
    loop_.cancel_timer(timer_);  // the connect deadline
    submit_queued();
    if (!flush()) return;
    if (pending_.empty()) arm_idle_timer();
}

void DohConnection::arm_idle_timer() {
    loop_.cancel_timer(timer_);
    timer_ = loop_.add_timer(loop_.now_ms() + options_.idle_timeout_ms, [this] {
        timer_ = EventLoop::kNoTimer;
        if (!pending_.empty() || state_ != State::Open) return;
        // A polite end (RFC 9113 §6.8), best effort: the socket closes right after.
        nghttp2_session_terminate_session(h2_, NGHTTP2_NO_ERROR);
        const uint64_t generation = generation_;
        if (flush() && generation == generation_) drop(false);
    });
}

void DohConnection::maybe_finish_drain() {
    if (state_ != State::Open) return;
    const bool wants = nghttp2_session_want_read(h2_) || nghttp2_session_want_write(h2_);
    if (going_away_ && streams_.empty()) {
        drop(false);  // reconnects at once for the queries still queued
        return;
    }
    if (!wants) {
        drop(false);
        return;
    }
    if (going_away_ && timer_ == EventLoop::kNoTimer) {
        timer_ = loop_.add_timer(loop_.now_ms() + kDrainMs, [this] {
            timer_ = EventLoop::kNoTimer;
            if (state_ == State::Open && going_away_) drop(false);
        });
    }
}

void DohConnection::update_interest() {
    if (fd_ < 0) return;
    uint32_t want = EPOLLIN;
    if (state_ == State::Connecting) {
        want = EPOLLOUT;
    } else if (want_write_ || woff_ < wbuf_.size()) {
        want |= EPOLLOUT;
    }
    if (want != interest_) {
        loop_.modify(registration_, want);
        interest_ = want;
    }
}

bool DohConnection::flush() {
    if (state_ != State::Open) return false;
    // Bounded: a few batches per call; EPOLLOUT brings the rest.
    for (int round = 0; round < 8; ++round) {
        if (woff_ == wbuf_.size()) {
            wbuf_.clear();
            woff_ = 0;
            while (wbuf_.size() < kWriteBatch) {
                const uint8_t* data = nullptr;
                const ssize_t n = nghttp2_session_mem_send(h2_, &data);
                if (n < 0) {
                    log_warning_limited("upstream %s: HTTP/2 error: %s",
                                        address_.to_string().c_str(),
                                        nghttp2_strerror(static_cast<int>(n)));
                    fail_soon();
                    return false;
                }
                if (n == 0) break;
                wbuf_.insert(wbuf_.end(), data, data + n);
            }
            if (wbuf_.empty()) break;
        }
        want_write_ = false;
        while (woff_ < wbuf_.size()) {
            const int n =
                SSL_write(ssl_, wbuf_.data() + woff_, static_cast<int>(wbuf_.size() - woff_));
            if (n > 0) {
                woff_ += static_cast<size_t>(n);
                continue;
            }
            const int error = SSL_get_error(ssl_, n);
            if (error == SSL_ERROR_WANT_WRITE || error == SSL_ERROR_WANT_READ) {
                want_write_ = error == SSL_ERROR_WANT_WRITE;
                update_interest();
                return true;
            }
            fail_soon();
            return false;
        }
    }
    update_interest();
    return true;
}

void DohConnection::on_event(uint32_t events) {
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
            read_input();
            deliver();
            if (generation != generation_ || state_ != State::Open) return;
            submit_queued();  // after a GOAWAY's drop they wait; otherwise nothing is queued
            if (!flush() || generation != generation_) return;
            maybe_finish_drain();
            if (generation == generation_ && state_ == State::Open && pending_.empty() &&
                timer_ == EventLoop::kNoTimer) {
                arm_idle_timer();
            }
            return;
        }
        case State::Closed:
        case State::Backoff:
            return;
    }
}

void DohConnection::read_input() {
    uint8_t buf[kReadChunk];
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
        const int n = SSL_read(ssl_, buf, sizeof buf);
        if (n <= 0) {
            const int error = SSL_get_error(ssl_, n);
            if (error == SSL_ERROR_WANT_READ) return;
            if (error == SSL_ERROR_WANT_WRITE) {
                want_write_ = true;
                return;
            }
            // Closed by the server (a restart): the queries on it are sent again.
            drop(false);
            return;
        }
        const ssize_t used = nghttp2_session_mem_recv(h2_, buf, static_cast<size_t>(n));
        if (used < 0) {
            log_warning_limited("upstream %s: HTTP/2 protocol error: %s",
                                address_.to_string().c_str(),
                                nghttp2_strerror(static_cast<int>(used)));
            drop(true);
            return;
        }
    }
}

void DohConnection::on_stream_closed(int32_t stream, uint32_t error_code) {
    auto s = streams_.find(stream);
    if (s == streams_.end()) return;
    const uint16_t handle = s->second;
    streams_.erase(s);
    auto it = pending_.find(handle);
    if (it == pending_.end()) return;
    Pending& p = it->second;
    if (p.waiter == nullptr) {
        pending_.erase(it);
        return;
    }
    if (error_code == NGHTTP2_REFUSED_STREAM && !p.resent) {
        // RFC 9113 §8.7: the server did not process it (above GOAWAY's last-stream-id, or
        // never sent): safe to send again, on the next connection.
        p.resent = true;
        p.stream = -1;
        p.status = 0;
        p.content_type_ok = false;
        p.header_bytes = 0;
        p.answer.clear();
        going_away_ = true;
        return;
    }
    const uint32_t rtt = static_cast<uint32_t>(monotonic_us() - p.sent_at_us);
    Completion done{p.waiter, Outcome::Failed, {}, rtt};
    if (error_code == NGHTTP2_NO_ERROR && !p.broken && p.status != 0) {
        if (p.status == 200 && p.content_type_ok &&
            dns::answers_question(p.answer, 0, p.question)) {
            done.outcome = Outcome::Answer;
            done.answer = std::move(p.answer);
        } else if (p.status == 200) {
            bump(counters_.dropped_mismatched);  // not a DNS answer to what we asked
            done.outcome = Outcome::Refused;
        } else {
            // RFC 8484 §4.2.1: 429, 5xx (and 4xx, a path or config we got wrong) carry no
            // DNS answer.
            bump(counters_.upstream_doh_http_errors);
            log_warning_limited("upstream %s: HTTP status %d", address_.to_string().c_str(),
                                p.status);
            done.outcome = Outcome::Refused;
        }
    }
    pending_.erase(it);
    completions_.push_back(std::move(done));
}

void DohConnection::deliver() {
    if (completions_.empty()) return;
    std::vector<Completion> done;
    done.swap(completions_);
    for (Completion& c : done) {
        switch (c.outcome) {
            case Outcome::Answer:
                c.waiter->on_stream_answer(dns::Bytes(c.answer.data(), c.answer.size()), c.rtt_us);
                break;
            case Outcome::Failed:
                c.waiter->on_stream_failed();
                break;
            case Outcome::Refused:
                c.waiter->on_stream_refused();
                break;
        }
    }
}

void DohConnection::drop(bool failed) {
    loop_.cancel_timer(timer_);
    // Streams nghttp2 still holds close inside nghttp2_session_del without callbacks we act
    // on; the waiters are told below.
    if (h2_ != nullptr) {
        nghttp2_session_del(h2_);
        h2_ = nullptr;
    }
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
    going_away_ = false;
    wbuf_.clear();
    woff_ = 0;
    streams_.clear();
    // Who hears: every query that went out on this connection (its fate is unknown), and on a
    // failure the queued ones too, so that they try another server rather than wait.
    std::vector<Waiter*> lost;
    for (auto it = pending_.begin(); it != pending_.end();) {
        Pending& p = it->second;
        const bool sent = p.stream >= 0;
        if (p.waiter == nullptr || sent || failed) {
            if (p.waiter != nullptr) lost.push_back(p.waiter);
            it = pending_.erase(it);
        } else {
            p.sent_at_us = 0;
            ++it;
        }
    }
    if (failed) {
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
        if (!pending_.empty()) {
            // Queries never sent (refused by GOAWAY, or queued behind it): a fresh connection
            // from the loop, never from inside a caller's send or reset.
            timer_ = loop_.add_timer(loop_.now_ms(), [this] {
                timer_ = EventLoop::kNoTimer;
                if (state_ == State::Closed && !pending_.empty()) connect_now();
            });
        }
    }
    // Completions decided before the drop still go out, each once.
    deliver();
    for (Waiter* w : lost) w->on_stream_failed();
}

}  // namespace nscache::upstream
