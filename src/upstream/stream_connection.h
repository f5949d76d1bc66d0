// SPDX-License-Identifier: BSD-3-Clause
// One worker's long-lived connection to one upstream over TCP (RFC 7766) or TLS (RFC 7858):
// queries from any of the worker's UpstreamQuerys are pipelined on it, each with an ID no
// other query on the connection holds, and answers are matched by ID and question in
// whatever order they come. The connection opens on the first query, closes after
// `idle_timeout_ms` with nothing outstanding, and reconnects on the next query; a connect or
// handshake that fails makes the next try wait (backoff doubling from 50 ms to 5 s), and
// queries sent meanwhile wait for it. When the connection drops, every query still on it is
// told, so it can be sent again.
//
// A query that gives up keeps its ID quarantined on the socket it went out on, so that a late
// answer is recognised and dropped, never matched to a later query with the same ID. Those
// IDs would fill the table (an upstream that drops queries, or a client asking names it never
// answers, would otherwise take the connection from everyone): past kRetireAbandoned of them
// the next query moves to a fresh socket, and the old one drains (its live queries are still
// answered on it; it closes when none is left). Before it is open, a socket has sent nothing,
// so there the abandoned IDs are simply freed.
//
// Over TLS, queries are padded to a multiple of 128 octets (RFC 8467 §4.1), the server must
// authenticate (TlsClient::authenticated) unless the mode is opportunistic, and the session
// the server hands out is offered again on the next connect (resumption).
//
// Lives on one worker's event loop; owned by the worker's Resolver (StreamPool below), so it
// outlives every query that uses it. Internal to upstream/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "config/address.h"
#include "dns/response.h"
#include "upstream/message_stream.h"
#include "upstream/tls_client.h"
#include "upstream/upstream_set.h"

struct ssl_st;
struct ssl_session_st;

namespace nscache::upstream {

struct StreamOptions {
    uint64_t idle_timeout_ms = 10'000;
    uint16_t edns_buffer_size = 1232;
};

class StreamConnection final : public EventHandler, public MessageStream {
  public:
    using Waiter = MessageStream::Waiter;

    // `tls` null: plain TCP. `peer` says what a TLS server must prove.
    StreamConnection(EventLoop& loop, WorkerCounters& counters, const SocketAddress& address,
                     const TlsClient* tls, TlsPeer peer, StreamOptions options);
    ~StreamConnection();
    StreamConnection(const StreamConnection&) = delete;
    StreamConnection& operator=(const StreamConnection&) = delete;

    // Queues a query for `question` (which must outlive the query) and returns its ID in
    // `id`; false when too many queries on it still wait for their answers (never because of
    // queries that gave up).
    bool send(const dns::UpstreamQuestion& question, Waiter* waiter, uint16_t& id) override;
    // `waiter` no longer wants the answer to `id`: its ID stays quarantined on its socket
    // until the answer comes or the socket closes (counted in upstream_stream_abandoned).
    void cancel(uint16_t id, const Waiter* waiter) override;
    // Drops the connection and those draining (a broken answer came on one of them); every
    // query on them is told.
    void reset() override;

    // A connect or handshake failed lately and the next one waits: opportunistic TLS goes to
    // cleartext meanwhile.
    bool backing_off() const override { return state_ == State::Backoff; }
    bool open() const override { return state_ == State::Open; }
    // Queries that still wait for an answer, on this socket and those draining.
    size_t outstanding() const override;
    const SocketAddress& address() const override { return address_; }

    void on_event(uint32_t events) override;

  private:
    enum class State { Closed, Backoff, Connecting, Handshaking, Open };
    struct Pending {
        Waiter* waiter = nullptr;  // null: cancelled, the answer is dropped
        dns::UpstreamQuestion question;
        uint64_t sent_at_us = 0;  // 0: written before the connection was open
    };

    void connect_now();
    void on_connected();
    void on_handshake();
    // Closes the socket; `failed` starts or lengthens the backoff. Every waiter is told.
    void drop(bool failed);
    // Writes what it can; false when the connection failed (waiters hear of it soon).
    bool flush();
    void read_answers();
    // Frames in rbuf_; false when the connection was dropped meanwhile.
    bool process_frames();
    void update_interest();
    void arm_idle_timer();
    // A failure found inside send(): waiters hear of it from the loop, never from send().
    void fail_soon();
    void after_open();
    size_t abandoned() const { return pending_.size() - live_; }
    void append_frame(const dns::UpstreamQuestion& question, uint16_t id);
    // Not yet open, nothing sent: frees the abandoned IDs and frames only the live queries.
    void compact();
    // Open: the socket and its queries move to a draining connection; this one starts afresh.
    void retire_socket();
    // A draining connection closed: the parent frees it from the loop, outside its calls.
    void reap_soon();
    // Bytes in/out through TLS or the socket; <0 with errno EAGAIN, 0 at EOF.
    ssize_t raw_read(uint8_t* buf, size_t len);
    ssize_t raw_write(const uint8_t* buf, size_t len);

    EventLoop& loop_;
    WorkerCounters& counters_;
    const SocketAddress address_;
    const TlsClient* const tls_;
    const TlsPeer peer_;
    const StreamOptions options_;

    State state_ = State::Closed;
    int fd_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    ssl_st* ssl_ = nullptr;
    ssl_session_st* session_ = nullptr;  // the last session the server gave us
    bool want_write_ = false;            // TLS needs the socket writable to go on
    uint32_t interest_ = 0;
    uint64_t generation_ = 0;  // counts drops, so a loop can tell it was cut short
    uint32_t failures_ = 0;    // connects in a row that did not reach Open
    uint32_t live_ = 0;        // pending queries whose waiter still wants the answer
    bool delivering_ = false;  // inside a waiter's call from process_frames: rbuf_ is in use
    // A draining connection: the one that made it, which owns it; it takes no new query.
    StreamConnection* parent_ = nullptr;
    bool closing_ = false;  // draining, and told to close (too many were draining)
    std::vector<std::unique_ptr<StreamConnection>> draining_;
    EventLoop::TimerHandle reap_timer_ = EventLoop::kNoTimer;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;  // idle, backoff or connect deadline

    std::unordered_map<uint16_t, Pending> pending_;
    std::vector<uint8_t> wbuf_;  // framed queries not yet written
    size_t woff_ = 0;
    std::vector<uint8_t> rbuf_;
    size_t rhave_ = 0;
};

}  // namespace nscache::upstream
