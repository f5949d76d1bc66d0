// SPDX-License-Identifier: BSD-3-Clause
// One worker's HTTP/2 connection to one DNS over HTTPS upstream (RFC 8484): every query of the
// worker's UpstreamQuerys to that server is a stream of its own on it, a POST of
// application/dns-message to the server's path with DNS ID 0 (RFC 8484 §4.1: the stream, not
// the ID, matches the answer; the question is still checked). nghttp2 keeps the HTTP/2 state
// over memory buffers (nghttp2_session_mem_recv / mem_send); this class moves the bytes
// through the TLS connection on the worker's event loop, as StreamConnection does for DoT.
//
// Guarantees
// - TLS is authenticated exactly as for a tls:// upstream (TlsClient::authenticated; the
//   tls-auth mode decides whether an unauthenticated server is used) and the server must
//   choose ALPN "h2" (RFC 8484 §5.2). Nothing is ever sent in cleartext: a DoH server has no
//   cleartext twin, so there is no fallback in any mode.
// - Queries are padded to a multiple of 128 octets (RFC 8467 §4.1), as over DoT.
// - HTTP 429 and 5xx (and any status but 200 with a DNS message) are refusals the query hears
//   of (Waiter::on_stream_refused): it fails over as from an unusable answer. A GOAWAY makes
//   the connection take no new stream: the streams the server will still answer finish on it
//   (bounded by kDrainMs), those it refused (above its last-stream-id, or never sent) are
//   sent again on the next connection, once each; later refusals are failures.
// - The connection opens on the first query, closes after `idle_timeout_ms` with nothing
//   outstanding, and a connect, handshake or protocol failure makes the next try wait (the
//   backoff of StreamConnection: 50 ms doubling to 5 s); queries sent meanwhile wait for it.
// - Bounded: kMaxLive queries at once (the server's SETTINGS_MAX_CONCURRENT_STREAMS holds
//   the rest in nghttp2's queue), answers of 65,535 octets at most, response header lists of
//   16 KiB at most, and a bounded number of reads per readiness event.
//
// Lives on one worker's event loop; owned by the worker's StreamPool, so it outlives every
// query that uses it. Internal to upstream/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "upstream/message_stream.h"
#include "upstream/stream_connection.h"
#include "upstream/tls_client.h"

struct ssl_st;
struct ssl_session_st;
struct nghttp2_session;

namespace nscache::upstream {

struct UpstreamServer;

class DohConnection final : public EventHandler, public MessageStream {
  public:
    static constexpr size_t kMaxLive = 1024;
    static constexpr uint64_t kDrainMs = 2000;

    // `server` says where, which path and what the certificate must prove; it must outlive
    // the connection (the StreamPool entry holds it).
    DohConnection(EventLoop& loop, WorkerCounters& counters, const UpstreamServer& server,
                  const TlsClient& tls, StreamOptions options);
    ~DohConnection();
    DohConnection(const DohConnection&) = delete;
    DohConnection& operator=(const DohConnection&) = delete;

    bool send(const dns::UpstreamQuestion& question, Waiter* waiter, uint16_t& id) override;
    void cancel(uint16_t id, const Waiter* waiter) override;
    void reset() override;
    bool backing_off() const override { return state_ == State::Backoff; }
    bool open() const override { return state_ == State::Open && !going_away_; }
    size_t outstanding() const override { return pending_.size(); }
    const SocketAddress& address() const override { return address_; }

    void on_event(uint32_t events) override;

    // nghttp2's callbacks (doh_connection.cpp), on the connection they were made for.
    struct Callbacks;

  private:
    enum class State { Closed, Backoff, Connecting, Handshaking, Open };
    struct Pending {
        Waiter* waiter = nullptr;  // null: cancelled, its stream is reset
        dns::UpstreamQuestion question;
        std::vector<uint8_t> body;  // the padded query, ID 0
        size_t body_off = 0;
        int32_t stream = -1;      // -1: not submitted on this connection yet
        uint64_t sent_at_us = 0;  // 0: queued before the connection was open
        bool resent = false;      // refused once (GOAWAY) and submitted again
        int status = 0;
        bool content_type_ok = false;
        bool broken = false;  // a header list or a body past its bound
        size_t header_bytes = 0;
        std::vector<uint8_t> answer;
    };
    enum class Outcome { Answer, Failed, Refused };
    // What a callback decided, delivered once nghttp2 has returned (a waiter may send,
    // cancel or reset from its call).
    struct Completion {
        Waiter* waiter;
        Outcome outcome;
        std::vector<uint8_t> answer;
        uint32_t rtt_us;
    };

    void connect_now();
    void on_connected();
    void on_handshake();
    bool start_session();
    // Closes the socket and the session. Every submitted query hears of it; those never sent
    // stay for the next connection, unless `failed` (a connect or handshake failure: then all
    // hear, and the next try waits for the backoff).
    void drop(bool failed);
    void fail_soon();
    void after_open();
    void submit(uint16_t handle, Pending& p);
    void submit_queued();
    // Runs nghttp2's output through TLS; false when the connection was dropped.
    bool flush();
    void read_input();
    void deliver();
    void update_interest();
    void arm_idle_timer();
    // After GOAWAY, or when nghttp2 wants nothing more: the connection ends once no stream
    // is left on it, or at the drain deadline.
    void maybe_finish_drain();
    void on_stream_closed(int32_t stream, uint32_t error_code);
    Pending* pending_of(int32_t stream);

    EventLoop& loop_;
    WorkerCounters& counters_;
    const SocketAddress address_;
    const std::string path_;
    const std::string authority_;
    const TlsClient& tls_;
    const TlsPeer peer_;
    const StreamOptions options_;

    State state_ = State::Closed;
    int fd_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    ssl_st* ssl_ = nullptr;
    ssl_session_st* session_ = nullptr;  // the last TLS session the server gave us
    nghttp2_session* h2_ = nullptr;
    bool want_write_ = false;  // TLS needs the socket writable to go on
    bool going_away_ = false;  // GOAWAY came: no new stream on this connection
    uint32_t interest_ = 0;
    uint64_t generation_ = 0;  // counts drops
    uint32_t failures_ = 0;    // connects in a row that did not reach Open
    uint16_t next_handle_ = 1;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;  // idle, backoff, connect or drain

    std::unordered_map<uint16_t, Pending> pending_;  // by handle
    std::unordered_map<int32_t, uint16_t> streams_;  // submitted stream -> handle
    std::vector<Completion> completions_;
    std::vector<uint8_t> wbuf_;  // nghttp2 output not yet written
    size_t woff_ = 0;
};

}  // namespace nscache::upstream
