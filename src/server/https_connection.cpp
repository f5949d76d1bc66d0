// SPDX-License-Identifier: BSD-3-Clause
#include "server/https_connection.h"

#include <nghttp2/nghttp2.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "dns/answer_ttl.h"
#include "server/doh_request.h"
#include "server/tcp_connection.h"

namespace nscache::server {
namespace {

constexpr size_t kReadChunk = 16 << 10;
// Frames are pulled from nghttp2 until this much waits for TLS: one write of a few records.
constexpr size_t kWriteChunk = 64 << 10;
constexpr size_t kMaxAnswer = 65535;
// RFC 9113 §3.4: what an HTTP/2 client sends first.
constexpr std::string_view kClientPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr std::string_view kHttp1Answer =
    "HTTP/1.1 505 HTTP Version Not Supported\r\n"
    "Content-Type: text/plain\r\n"
    "Content-Length: 53\r\n"
    "Connection: close\r\n"
    "\r\n"
    "DNS over HTTPS is served over HTTP/2 only (RFC 8484)\n";
static_assert(kHttp1Answer.size() - kHttp1Answer.find("\r\n\r\n") - 4 == 53);

nghttp2_nv header(std::string_view name, std::string_view value) {
    return nghttp2_nv{reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                      value.size(), NGHTTP2_NV_FLAG_NONE};
}

}  // namespace

struct HttpsConnection::Stream {
    int32_t id = 0;
    std::string method, path, content_type, content_length;
    size_t header_bytes = 0;
    std::vector<uint8_t> data;  // the request's body, then the answer's
    size_t sent = 0;            // of the answer, taken by nghttp2
    uint64_t opened_ms = 0;
    bool body_expected = false;
    bool head_done = false;
    bool dispatched = false;  // handed to the pipeline, or answered
    bool waiting = false;     // its answer comes through send_answer()
    bool responded = false;
};

// nghttp2 calls these from inside mem_recv and mem_send: they only record, submit frames and
// hand queries to the pipeline, never close the connection (the caller does, after the call).
struct HttpsConnection::Callbacks {
    static HttpsConnection& of(void* user_data) {
        return *static_cast<HttpsConnection*>(user_data);
    }

    static int on_begin_headers(nghttp2_session* session, const nghttp2_frame* frame,
                                void* user_data) {
        HttpsConnection& c = of(user_data);
        if (frame->hd.type != NGHTTP2_HEADERS || frame->headers.cat != NGHTTP2_HCAT_REQUEST) {
            return 0;
        }
        if (c.streams_.size() >= kMaxConcurrentStreams || c.draining_ || c.closing_) {
            // nghttp2 refuses streams past the SETTINGS once the client acknowledged them;
            // this holds before that too.
            nghttp2_submit_rst_stream(session, NGHTTP2_FLAG_NONE, frame->hd.stream_id,
                                      NGHTTP2_REFUSED_STREAM);
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        auto stream = std::make_unique<Stream>();
        stream->id = frame->hd.stream_id;
        stream->opened_ms = c.loop_.now_ms();
        nghttp2_session_set_stream_user_data(session, stream->id, stream.get());
        c.streams_[stream->id] = std::move(stream);
        bump(c.counters_.doh_streams);
        return 0;
    }

    static int on_header(nghttp2_session* session, const nghttp2_frame* frame, const uint8_t* name,
                         size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                         void* user_data) {
        HttpsConnection& c = of(user_data);
        auto* stream = static_cast<Stream*>(
            nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        if (stream == nullptr) return 0;
        // RFC 9113 §6.5.2 counts each field as name + value + 32. A block that decodes past
        // the bound is an HPACK bomb, not a DNS client: the connection goes.
        stream->header_bytes += namelen + valuelen + 32;
        if (stream->header_bytes > kMaxHeaderListBytes) {
            c.abuse();
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE;
        }
        if (frame->headers.cat != NGHTTP2_HCAT_REQUEST) return 0;  // trailers: counted only
        const std::string_view n(reinterpret_cast<const char*>(name), namelen);
        const std::string_view v(reinterpret_cast<const char*>(value), valuelen);
        if (n == ":method") {
            stream->method = v;
        } else if (n == ":path") {
            stream->path = v;
        } else if (n == "content-type") {
            stream->content_type = v;
        } else if (n == "content-length") {
            stream->content_length = v;
        }
        return 0;
    }

    static int on_data_chunk(nghttp2_session* session, uint8_t, int32_t stream_id,
                             const uint8_t* data, size_t len, void* user_data) {
        auto* stream =
            static_cast<Stream*>(nghttp2_session_get_stream_user_data(session, stream_id));
        if (stream == nullptr || !stream->body_expected || stream->dispatched) return 0;
        if (stream->data.size() + len > kMaxDohMessage) {
            HttpsConnection& c = of(user_data);
            stream->data.clear();
            c.respond_error(*stream, 413);
            return 0;
        }
        stream->data.insert(stream->data.end(), data, data + len);
        return 0;
    }

    static int on_frame_recv(nghttp2_session* session, const nghttp2_frame* frame,
                             void* user_data) {
        HttpsConnection& c = of(user_data);
        switch (frame->hd.type) {
            case NGHTTP2_SETTINGS:
            case NGHTTP2_PING:
                if ((frame->hd.flags & NGHTTP2_FLAG_ACK) == 0 &&
                    !c.control_budget_.take(c.loop_.now_ms())) {
                    c.abuse();
                }
                return 0;
            case NGHTTP2_RST_STREAM:
                if (!c.reset_budget_.take(c.loop_.now_ms())) c.abuse();
                return 0;
            case NGHTTP2_HEADERS:
            case NGHTTP2_DATA:
                break;
            default:
                return 0;
        }
        auto* stream = static_cast<Stream*>(
            nghttp2_session_get_stream_user_data(session, frame->hd.stream_id));
        if (stream == nullptr || stream->dispatched) return 0;
        if (frame->hd.type == NGHTTP2_HEADERS && !stream->head_done) {
            stream->head_done = true;
            const DohHeadCheck check = check_request_head(
                {stream->method, stream->path, stream->content_type, stream->content_length},
                c.owner_.path());
            if (check.status != 0) {
                c.respond_error(*stream, check.status);
                return 0;
            }
            stream->body_expected = check.body_expected;
            if (!check.body_expected) {
                c.dispatch(*stream, check.query);
                return 0;
            }
        }
        if ((frame->hd.flags & NGHTTP2_FLAG_END_STREAM) != 0 && stream->body_expected) {
            const uint16_t status = check_dns_query(stream->data);
            if (status != 0) {
                c.respond_error(*stream, status);
            } else {
                const std::vector<uint8_t> query = std::move(stream->data);
                stream->data.clear();
                c.dispatch(*stream, query);
            }
        }
        return 0;
    }

    static int on_stream_close(nghttp2_session*, int32_t stream_id, uint32_t, void* user_data) {
        HttpsConnection& c = of(user_data);
        auto it = c.streams_.find(stream_id);
        if (it == c.streams_.end()) return 0;
        Stream& stream = *it->second;
        if (stream.waiting) --c.waiting_;
        if (stream.responded) c.account(-static_cast<ptrdiff_t>(stream.data.size() - stream.sent));
        c.streams_.erase(it);
        return 0;
    }

    static ssize_t read_answer(nghttp2_session*, int32_t, uint8_t* buf, size_t length,
                               uint32_t* data_flags, nghttp2_data_source* source, void* user_data) {
        HttpsConnection& c = of(user_data);
        auto* stream = static_cast<Stream*>(source->ptr);
        const size_t n = std::min(length, stream->data.size() - stream->sent);
        std::memcpy(buf, stream->data.data() + stream->sent, n);
        stream->sent += n;
        c.account(-static_cast<ptrdiff_t>(n));  // now in nghttp2's frame, counted in out_
        if (stream->sent == stream->data.size()) *data_flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }
};

HttpsConnection::HttpsConnection(HttpsConnections& owner, EventLoop& loop, QueryPipeline& pipeline,
                                 int fd, uint64_t id, const sockaddr_storage& peer,
                                 socklen_t peer_len, ssl_ctx_st* tls)
    : owner_(owner),
      shared_(owner.shared()),
      counters_(owner.counters()),
      loop_(loop),
      pipeline_(pipeline),
      fd_(fd),
      id_(id),
      peer_(peer),
      peer_len_(peer_len),
      tls_(fd, tls) {}

HttpsConnection::~HttpsConnection() {
    loop_.cancel_timer(timer_);
    loop_.cancel_timer(resume_timer_);
    if (session_ != nullptr) nghttp2_session_del(session_);
    if (!closed_) {
        loop_.remove(registration_);
        close(fd_);
    }
    shared_.queued_bytes.fetch_sub(accounted_, std::memory_order_relaxed);
}

bool HttpsConnection::register_with_loop() {
    if (!tls_.usable()) return false;
    interest_ = EPOLLIN;
    if (!loop_.add(fd_, interest_, this, registration_)) return false;
    accepted_ms_ = idle_since_ms_ = loop_.now_ms();
    reschedule();
    return true;
}

void HttpsConnection::account(ptrdiff_t bytes) {
    accounted_ = static_cast<size_t>(static_cast<ptrdiff_t>(accounted_) + bytes);
    if (bytes >= 0) {
        shared_.queued_bytes.fetch_add(static_cast<size_t>(bytes), std::memory_order_relaxed);
    } else {
        shared_.queued_bytes.fetch_sub(static_cast<size_t>(-bytes), std::memory_order_relaxed);
    }
}

void HttpsConnection::on_event(uint32_t events) {
    if (closed_) return;
    if (events & (EPOLLERR | EPOLLHUP)) {
        close_connection();
        return;
    }
    if (phase_ == Phase::Handshake) {
        handshake();
    } else {
        if ((events & EPOLLOUT) || (write_wants_read_ && (events & EPOLLIN))) flush();
        if (!closed_ && ((events & EPOLLIN) || (read_wants_write_ && (events & EPOLLOUT)))) {
            read_input();
        }
    }
    if (!closed_) update_interest();
}

void HttpsConnection::handshake() {
    switch (tls_.handshake()) {
        case TlsStream::Io::Done:
            break;
        case TlsStream::Io::WantRead:
            read_wants_write_ = false;
            return;
        case TlsStream::Io::WantWrite:
            read_wants_write_ = true;  // update_interest() asks for EPOLLOUT
            return;
        default:
            bump(counters_.doh_handshake_failures);
            close_connection();
            return;
    }
    read_wants_write_ = false;
    bump(counters_.doh_handshakes);
    if (tls_.resumed()) bump(counters_.doh_resumed);
    idle_since_ms_ = loop_.now_ms();
    if (tls_.alpn() == "h2") {
        phase_ = Phase::Http2;
        if (!start_session()) {
            close_connection();
            return;
        }
        flush();  // the server's SETTINGS
    } else {
        phase_ = Phase::Sniff;
    }
    if (!closed_) read_input();  // the client's first bytes may have come with its Finished
}

bool HttpsConnection::start_session() {
    nghttp2_session_callbacks* callbacks = nullptr;
    if (nghttp2_session_callbacks_new(&callbacks) != 0) return false;
    nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks, Callbacks::on_begin_headers);
    nghttp2_session_callbacks_set_on_header_callback(callbacks, Callbacks::on_header);
    nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks, Callbacks::on_data_chunk);
    nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks, Callbacks::on_frame_recv);
    nghttp2_session_callbacks_set_on_stream_close_callback(callbacks, Callbacks::on_stream_close);
    nghttp2_option* option = nullptr;
    if (nghttp2_option_new(&option) != 0) {
        nghttp2_session_callbacks_del(callbacks);
        return false;
    }
    // No priority tree to keep closed streams for: answers are small and go out as they come.
    nghttp2_option_set_no_closed_streams(option, 1);
    nghttp2_option_set_max_settings(option, 16);
    // ACKs the client does not read pile up in the session: past this, nghttp2 gives up.
    nghttp2_option_set_max_outbound_ack(option, 100);
    const int rv = nghttp2_session_server_new2(&session_, callbacks, this, option);
    nghttp2_option_del(option);
    nghttp2_session_callbacks_del(callbacks);
    if (rv != 0) {
        session_ = nullptr;
        return false;
    }
    const nghttp2_settings_entry settings[] = {
        {NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS, kMaxConcurrentStreams},
        {NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE, kMaxHeaderListBytes},
        {NGHTTP2_SETTINGS_ENABLE_PUSH, 0},
    };
    return nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, settings,
                                   sizeof settings / sizeof settings[0]) == 0;
}

void HttpsConnection::read_input() {
    thread_local uint8_t buffer[kReadChunk];
    bool more = false;
    for (int round = 0; round < 4 && !closed_ && !closing_; ++round) {
        if (accounted_ > kReadPauseBytes) break;  // resumes when the answers drain
        size_t moved = 0;
        const TlsStream::Io io = tls_.read(buffer, sizeof buffer, moved);
        if (io == TlsStream::Io::Done) {
            read_wants_write_ = false;
            if (phase_ == Phase::Sniff) {
                sniff(buffer, moved);
            } else if (phase_ == Phase::Http2) {
                feed(buffer, moved);
            }  // Phase::Http1: the answer is on its way, the request is not read
            more = round == 3;
            continue;
        }
        if (io == TlsStream::Io::WantRead) {
            read_wants_write_ = false;
        } else if (io == TlsStream::Io::WantWrite) {
            read_wants_write_ = true;
        } else {
            close_connection();  // the client closed, or TLS failed
            return;
        }
        break;
    }
    if (closed_) return;
    if ((more || tls_.buffered() > 0) && !closing_ && resume_timer_ == EventLoop::kNoTimer) {
        resume_timer_ = loop_.add_timer(0, [this] {
            resume_timer_ = EventLoop::kNoTimer;
            if (closed_) return;
            read_input();
            if (!closed_) update_interest();
        });
    }
    flush();
}

void HttpsConnection::sniff(const uint8_t* data, size_t size) {
    sniffed_.insert(sniffed_.end(), data, data + size);
    const size_t compared = std::min(sniffed_.size(), kClientPreface.size());
    if (std::memcmp(sniffed_.data(), kClientPreface.data(), compared) != 0) {
        // HTTP/1.1 (or garbage): one clear answer, then close.
        phase_ = Phase::Http1;
        bump(counters_.doh_http1);
        sniffed_.clear();
        out_.insert(out_.end(), kHttp1Answer.begin(), kHttp1Answer.end());
        account(static_cast<ptrdiff_t>(kHttp1Answer.size()));
        closing_ = true;
        return;
    }
    if (sniffed_.size() < kClientPreface.size()) return;  // bounded: 24 bytes at most wait
    phase_ = Phase::Http2;                                // prior knowledge without ALPN
    if (!start_session()) {
        failed_ = true;
        return;
    }
    std::vector<uint8_t> first = std::move(sniffed_);
    sniffed_.clear();
    feed(first.data(), first.size());
}

void HttpsConnection::feed(const uint8_t* data, size_t size) {
    in_session_ = true;
    const ssize_t rv = nghttp2_session_mem_recv(session_, data, size);
    in_session_ = false;
    if (rv < 0) {
        if (rv == NGHTTP2_ERR_FLOODED && !abused_) {
            abused_ = true;
            bump(counters_.doh_abuse_closed);
        }
        failed_ = true;
    }
    flush();
}

void HttpsConnection::dispatch(Stream& stream, std::span<const uint8_t> query) {
    stream.dispatched = true;
    ClientOrigin origin;
    origin.transport = Transport::Https;
    origin.tcp_connection = id_;
    origin.stream = static_cast<uint32_t>(stream.id);
    origin.peer = reinterpret_cast<const sockaddr*>(&peer_);
    origin.peer_len = peer_len_;
    thread_local std::vector<uint8_t> answer(kMaxAnswer);
    const HandleResult result = pipeline_.handle(query, origin, answer);
    idle_since_ms_ = loop_.now_ms();
    if (result.reply_length > 0) {
        const std::span<const uint8_t> reply(answer.data(), result.reply_length);
        respond(stream, 200, reply, dns::answer_min_ttl(reply));
    } else if (result.pending) {
        stream.waiting = true;
        ++waiting_;
    } else {
        respond_error(stream, 503);  // dropped (overload): say so rather than leave it open
    }
}

void HttpsConnection::respond(Stream& stream, uint16_t status, std::span<const uint8_t> body,
                              uint32_t max_age) {
    stream.dispatched = true;
    stream.responded = true;
    stream.data.assign(body.begin(), body.end());
    stream.sent = 0;
    account(static_cast<ptrdiff_t>(body.size()));
    const std::string status_text = std::to_string(status);
    const std::string length = std::to_string(body.size());
    const std::string cache_control = "max-age=" + std::to_string(max_age);
    nghttp2_nv headers[4];
    size_t count = 0;
    headers[count++] = header(":status", status_text);
    if (status == 200) {
        headers[count++] = header("content-type", kDnsMessageType);
        headers[count++] = header("cache-control", cache_control);
    } else {
        headers[count++] = header("content-type", "text/plain");
        if (status == 405) headers[count++] = header("allow", kDohAllowedMethods);
    }
    headers[count++] = header("content-length", length);
    nghttp2_data_provider provider;
    provider.source.ptr = &stream;
    provider.read_callback = Callbacks::read_answer;
    if (nghttp2_submit_response(session_, stream.id, headers, count, &provider) != 0) {
        nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, stream.id, NGHTTP2_INTERNAL_ERROR);
    }
    switch (status) {
        case 200:
            bump(counters_.doh_status_200);
            break;
        case 400:
            bump(counters_.doh_status_400);
            break;
        case 404:
            bump(counters_.doh_status_404);
            break;
        case 405:
            bump(counters_.doh_status_405);
            break;
        case 413:
            bump(counters_.doh_status_413);
            break;
        case 415:
            bump(counters_.doh_status_415);
            break;
        default:
            bump(counters_.doh_status_other);
            break;
    }
}

void HttpsConnection::respond_error(Stream& stream, uint16_t status) {
    std::string text(doh_status_text(status));
    text += '\n';
    respond(stream, status,
            std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(text.data()), text.size()));
}

void HttpsConnection::send_answer(uint32_t stream_id, std::span<const uint8_t> answer) {
    if (closed_) return;
    auto it = streams_.find(static_cast<int32_t>(stream_id));
    if (it == streams_.end() || !it->second->waiting) return;  // reset meanwhile
    Stream& stream = *it->second;
    stream.waiting = false;
    --waiting_;
    respond(stream, 200, answer, dns::answer_min_ttl(answer));
    if (in_session_) return;  // the running mem_recv's caller sends it
    flush();
    if (!closed_) update_interest();
}

void HttpsConnection::abuse() {
    if (!abused_) {
        abused_ = true;
        bump(counters_.doh_abuse_closed);
    }
    closing_ = true;
    if (session_ != nullptr) nghttp2_session_terminate_session(session_, NGHTTP2_ENHANCE_YOUR_CALM);
}

void HttpsConnection::drain() {
    if (closed_) return;
    draining_ = true;
    if (phase_ != Phase::Http2 || session_ == nullptr) {
        if (phase_ == Phase::Http1) return;  // its answer is being written, then it closes
        close_connection();
        return;
    }
    nghttp2_submit_goaway(session_, NGHTTP2_FLAG_NONE,
                          nghttp2_session_get_last_proc_stream_id(session_), NGHTTP2_NO_ERROR,
                          nullptr, 0);
    flush();
    if (!closed_) update_interest();
}

void HttpsConnection::flush() {
    if (closed_ || in_session_) return;
    if (failed_ || accounted_ > kMaxUnsentBytes ||
        shared_.queued_bytes.load(std::memory_order_relaxed) >
            TcpConnection::kMaxQueuedBytesTotal) {
        // A client that does not read its answers may not hold the daemon's memory.
        close_connection();
        return;
    }
    for (int round = 0; round < 64; ++round) {
        while (session_ != nullptr && unsent() < kWriteChunk) {
            const uint8_t* data = nullptr;
            const ssize_t n = nghttp2_session_mem_send(session_, &data);
            if (n < 0) {
                close_connection();
                return;
            }
            if (n == 0) break;
            out_.insert(out_.end(), data, data + n);
            account(n);
        }
        if (unsent() == 0) break;
        size_t moved = 0;
        const TlsStream::Io io = tls_.write(out_.data() + out_offset_, unsent(), moved);
        if (io == TlsStream::Io::Done) {
            write_wants_read_ = false;
            out_offset_ += moved;
            account(-static_cast<ptrdiff_t>(moved));
            if (out_offset_ == out_.size()) {
                out_.clear();
                out_offset_ = 0;
            }
            continue;
        }
        if (io == TlsStream::Io::WantRead) {
            write_wants_read_ = true;
        } else if (io == TlsStream::Io::WantWrite) {
            write_wants_read_ = false;
        } else {
            close_connection();
            return;
        }
        break;
    }
    if (unsent() == 0) {
        write_blocked_since_ = 0;
    } else if (write_blocked_since_ == 0) {
        // From when answers start to wait, the client has one idle period to take them all.
        write_blocked_since_ = loop_.now_ms();
    }
    const bool session_wants = session_ != nullptr && (nghttp2_session_want_write(session_) != 0);
    if (unsent() == 0 && !session_wants) {
        const bool session_over = session_ != nullptr && nghttp2_session_want_read(session_) == 0;
        if (closing_ || session_over || (draining_ && streams_.empty())) {
            tls_.shutdown();
            close_connection();
            return;
        }
    }
    reschedule();
}

void HttpsConnection::update_interest() {
    uint32_t wanted = 0;
    if (phase_ == Phase::Handshake) {
        wanted = read_wants_write_ ? EPOLLOUT : EPOLLIN;
    } else {
        if (!closing_ && accounted_ <= kReadPauseBytes) {
            wanted |= read_wants_write_ ? EPOLLOUT : EPOLLIN;
        }
        if (unsent() > 0) wanted |= write_wants_read_ ? EPOLLIN : EPOLLOUT;
    }
    if (wanted != interest_) {
        interest_ = wanted;
        loop_.modify(registration_, wanted);
    }
}

void HttpsConnection::reschedule() {
    if (closed_) return;
    const TcpLimits& limits = owner_.limits();
    const uint64_t now = loop_.now_ms();
    uint64_t at = UINT64_MAX;
    if (phase_ == Phase::Handshake || phase_ == Phase::Sniff) {
        at = accepted_ms_ + limits.read_timeout_ms;
    } else {
        for (const auto& [id, stream] : streams_) {  // at most kMaxConcurrentStreams
            if (!stream->dispatched) at = std::min(at, stream->opened_ms + limits.read_timeout_ms);
        }
        if (write_blocked_since_ != 0) {
            at = std::min(at, write_blocked_since_ + limits.idle_timeout_ms);
        }
        if (streams_.empty() && unsent() == 0) {
            at = std::min(at, idle_since_ms_ + limits.idle_timeout_ms);
        } else if (at == UINT64_MAX) {
            at = now + limits.idle_timeout_ms;  // answers awaited from upstream: look again
        }
    }
    if (timer_ != EventLoop::kNoTimer && timer_at_ <= at) return;
    loop_.cancel_timer(timer_);
    timer_at_ = at;
    timer_ = loop_.add_timer(at, [this] {
        timer_ = EventLoop::kNoTimer;
        on_timer();
    });
}

void HttpsConnection::on_timer() {
    if (closed_) return;
    const TcpLimits& limits = owner_.limits();
    const uint64_t now = loop_.now_ms();
    if (phase_ == Phase::Handshake || phase_ == Phase::Sniff) {
        if (now >= accepted_ms_ + limits.read_timeout_ms) {
            if (phase_ == Phase::Handshake) bump(counters_.doh_handshake_failures);
            close_connection();
            return;
        }
        reschedule();
        return;
    }
    if (write_blocked_since_ != 0 && now >= write_blocked_since_ + limits.idle_timeout_ms) {
        close_connection();  // answers wait and the client takes none
        return;
    }
    if (session_ != nullptr) {
        for (auto& [id, stream] : streams_) {
            if (stream->dispatched || now < stream->opened_ms + limits.read_timeout_ms) continue;
            // A request still incomplete (a body that never comes): its stream goes, the
            // connection's other streams go on.
            stream->dispatched = true;
            bump(counters_.doh_streams_timed_out);
            nghttp2_submit_rst_stream(session_, NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        }
        if (streams_.empty() && unsent() == 0 && now >= idle_since_ms_ + limits.idle_timeout_ms) {
            closing_ = true;
            nghttp2_session_terminate_session(session_, NGHTTP2_NO_ERROR);
        }
    }
    flush();
    if (!closed_) update_interest();
}

void HttpsConnection::close_connection() {
    if (closed_) return;
    closed_ = true;
    loop_.cancel_timer(timer_);
    loop_.cancel_timer(resume_timer_);
    loop_.remove(registration_);
    close(fd_);
    owner_.release(id_);
}

HttpsConnections::HttpsConnections(EventLoop& loop, QueryPipeline& pipeline, TcpShared& shared,
                                   WorkerCounters& counters)
    : loop_(loop), pipeline_(pipeline), shared_(shared), counters_(counters) {}

HttpsConnections::~HttpsConnections() {
    close_all();
}

bool HttpsConnections::adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len,
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
    std::unique_ptr<HttpsConnection>* slot = connections_.add(id);
    if (slot != nullptr) {
        *slot =
            std::make_unique<HttpsConnection>(*this, loop_, pipeline_, fd, id, peer, peer_len, tls);
        if ((*slot)->register_with_loop()) return true;
        connections_.remove(id);  // destroys the connection, which closes fd
    } else {
        close(fd);
    }
    shared_.per_client.release(peer_sa);
    shared_.connections.fetch_sub(1, std::memory_order_relaxed);
    return false;
}

HttpsConnection* HttpsConnections::find(uint64_t id) {
    std::unique_ptr<HttpsConnection>* slot = connections_.find(id);
    return slot != nullptr ? slot->get() : nullptr;
}

void HttpsConnections::release(uint64_t id) {
    std::unique_ptr<HttpsConnection>* slot = connections_.find(id);
    if (slot == nullptr) return;
    shared_.per_client.release(reinterpret_cast<const sockaddr*>(&(*slot)->peer()));
    shared_.connections.fetch_sub(1, std::memory_order_relaxed);
    // It may be on the call stack (it closed itself): destroyed on the next turn.
    graveyard_.push_back(std::move(*slot));
    connections_.remove(id);
    if (graveyard_.size() == 1) loop_.add_timer(0, [this] { graveyard_.clear(); });
}

void HttpsConnections::drain_all() {
    std::vector<uint64_t> ids;
    connections_.for_each(
        [&](uint64_t id, std::unique_ptr<HttpsConnection>&) { ids.push_back(id); });
    for (uint64_t id : ids) {
        if (HttpsConnection* c = find(id)) c->drain();
    }
}

void HttpsConnections::close_all() {
    connections_.for_each([this](uint64_t, std::unique_ptr<HttpsConnection>& c) {
        if (c && !c->closed()) {
            shared_.per_client.release(reinterpret_cast<const sockaddr*>(&c->peer()));
            shared_.connections.fetch_sub(1, std::memory_order_relaxed);
        }
    });
    connections_.clear();
    graveyard_.clear();
}

}  // namespace nscache::server
