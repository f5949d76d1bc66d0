// SPDX-License-Identifier: BSD-3-Clause
// DNS over HTTPS (RFC 8484) served over HTTP/2: one accepted TLS connection (TlsStream) and an
// nghttp2 server session fed from memory (nghttp2_session_mem_recv / mem_send: nghttp2 does no
// socket I/O, the worker's event loop does). Each request that doh_request.h accepts goes to
// the QueryPipeline as Transport::Https with this connection's id and its stream id; answers
// come back on that stream, in any order, many streams at once.
//
// A client that does not negotiate HTTP/2 (ALPN "http/1.1" or none, and no HTTP/2 preface)
// gets `HTTP/1.1 505 HTTP Version Not Supported` with a short text body and is closed.
//
// Limits, each against a known attack:
// - the TLS handshake must finish within read-timeout (a handshake that never ends);
// - SETTINGS_MAX_CONCURRENT_STREAMS kMaxConcurrentStreams; a request must be complete (headers
//   and body) within read-timeout of its first frame, or its stream is reset (a body that never
//   comes);
// - a header list that decodes past kMaxHeaderListBytes ends the connection (HPACK bomb: a few
//   bytes of indexed references decoding to megabytes);
// - SETTINGS and PING frames, and RST_STREAM frames, each within a FrameBudget (floods that
//   make the server queue ACKs; CVE-2023-44487 rapid reset): over it, GOAWAY with
//   ENHANCE_YOUR_CALM and the connection closes;
// - the idle timeout (no request and no answer for idle-timeout) and the TCP connection caps
//   (TcpConnections' limits, shared with TCP and DoT); bytes waiting to be sent count against a
//   per-connection bound and the process-wide one TcpShared keeps, and a client that lets them
//   overflow, or takes nothing for idle-timeout while answers wait, is closed.
// One worker's connections, used only from its thread.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "server/frame_budget.h"
#include "server/query_pipeline.h"
#include "server/tcp_shared.h"
#include "server/tls_stream.h"

struct nghttp2_session;
struct ssl_ctx_st;

namespace nscache::server {

class HttpsConnections;

class HttpsConnection final : public EventHandler {
  public:
    static constexpr uint32_t kMaxConcurrentStreams = 100;
    static constexpr size_t kMaxHeaderListBytes = 16 << 10;
    // Bytes waiting to be sent (answers not yet taken by the client's flow-control window,
    // frames not yet written) above which the connection is not read until they drain...
    static constexpr size_t kReadPauseBytes = 256 << 10;
    // ...and above which it is closed (100 streams of 4 KB answers fit several times over).
    static constexpr size_t kMaxUnsentBytes = 2 << 20;
    // SETTINGS and PING: a client sends a handful; RST_STREAM: a browser cancels a few.
    static constexpr uint32_t kControlBurst = 50, kControlPerSecond = 10;
    static constexpr uint32_t kResetBurst = 100, kResetPerSecond = 10;

    HttpsConnection(HttpsConnections& owner, EventLoop& loop, QueryPipeline& pipeline, int fd,
                    uint64_t id, const sockaddr_storage& peer, socklen_t peer_len, ssl_ctx_st* tls);
    ~HttpsConnection();
    HttpsConnection(const HttpsConnection&) = delete;
    HttpsConnection& operator=(const HttpsConnection&) = delete;

    // False when the connection could not start (no TLS object, epoll refused it).
    bool register_with_loop();
    void on_event(uint32_t events) override;
    // An answer that was pending for `stream`; nothing when the stream is gone (reset).
    void send_answer(uint32_t stream, std::span<const uint8_t> answer);
    // GOAWAY: no new requests; those already received are answered, then the connection closes.
    void drain();
    bool closed() const { return closed_; }
    const sockaddr_storage& peer() const { return peer_; }

    // nghttp2's callbacks (https_connection.cpp), which reach the connection as user data.
    struct Callbacks;
    struct Stream;

  private:
    enum class Phase : uint8_t { Handshake, Sniff, Http2, Http1 };

    void handshake();
    void read_input();
    // Phase::Sniff: no "h2" from ALPN; the first bytes say whether this is HTTP/2 anyway.
    void sniff(const uint8_t* data, size_t size);
    bool start_session();
    void feed(const uint8_t* data, size_t size);
    void flush();
    void update_interest();
    void reschedule();
    void on_timer();
    // Request complete on `stream`: checks it and hands its query to the pipeline.
    void dispatch(Stream& stream, std::span<const uint8_t> query);
    void respond(Stream& stream, uint16_t status, std::span<const uint8_t> body,
                 uint32_t max_age = 0);
    void respond_error(Stream& stream, uint16_t status);
    // The client broke a bound: GOAWAY ENHANCE_YOUR_CALM, then close once it is written.
    void abuse();
    void account(ptrdiff_t bytes);
    size_t unsent() const { return out_.size() - out_offset_; }
    void close_connection();

    HttpsConnections& owner_;
    TcpShared& shared_;
    WorkerCounters& counters_;
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    const int fd_;
    const uint64_t id_;
    sockaddr_storage peer_;
    socklen_t peer_len_;
    TlsStream tls_;
    nghttp2_session* session_ = nullptr;

    Phase phase_ = Phase::Handshake;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    uint32_t interest_ = 0;
    bool read_wants_write_ = false;  // TLS needs the socket writable to go on reading
    bool write_wants_read_ = false;  // ...or readable to go on writing
    std::unordered_map<int32_t, std::unique_ptr<Stream>> streams_;
    std::vector<uint8_t> sniffed_;  // Phase::Sniff: the first bytes read
    std::vector<uint8_t> out_;      // bytes for TlsStream::write
    size_t out_offset_ = 0;
    size_t accounted_ = 0;     // what this connection counts in shared_.queued_bytes
    uint32_t waiting_ = 0;     // streams whose query waits on the pipeline
    bool in_session_ = false;  // inside mem_recv: answers are submitted, sent after it
    bool closing_ = false;     // write what is queued, then close
    bool failed_ = false;      // a bound broken inside nghttp2's call: close after it
    bool abused_ = false;
    bool draining_ = false;
    bool closed_ = false;
    FrameBudget control_budget_{kControlBurst, kControlPerSecond};
    FrameBudget reset_budget_{kResetBurst, kResetPerSecond};
    uint64_t accepted_ms_ = 0;
    uint64_t idle_since_ms_ = 0;
    uint64_t write_blocked_since_ = 0;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;
    uint64_t timer_at_ = 0;
    // Reads again, next turn, what TLS holds decrypted (the socket will not say so).
    EventLoop::TimerHandle resume_timer_ = EventLoop::kNoTimer;
};

// The DNS over HTTPS connections of one worker, addressed by SlotTable ids. The connection
// caps and byte bounds are TCP's (TcpShared, TcpLimits): one client's TCP, DoT and DoH
// connections count together.
class HttpsConnections {
  public:
    HttpsConnections(EventLoop& loop, QueryPipeline& pipeline, TcpShared& shared,
                     WorkerCounters& counters);
    ~HttpsConnections();

    // Takes ownership of an accepted socket and serves it with `tls` (the context's
    // reference is taken by the connection); false (socket closed) over a cap.
    bool adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len, ssl_ctx_st* tls);
    HttpsConnection* find(uint64_t id);
    void release(uint64_t id);  // a connection that closed itself; destroyed next turn
    void close_all();
    void drain_all();
    size_t size() const { return connections_.size(); }

    TcpShared& shared() { return shared_; }
    WorkerCounters& counters() { return counters_; }
    const TcpLimits& limits() const { return limits_; }
    const std::string& path() const { return path_; }
    // From the worker's settings (a reload changes them).
    void configure(const TcpLimits& limits, const std::string& https_path) {
        limits_ = limits;
        path_ = https_path;
    }

  private:
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    TcpShared& shared_;
    WorkerCounters& counters_;
    TcpLimits limits_;
    std::string path_ = "/dns-query";
    SlotTable<std::unique_ptr<HttpsConnection>> connections_;
    std::vector<std::unique_ptr<HttpsConnection>> graveyard_;
};

}  // namespace nscache::server
