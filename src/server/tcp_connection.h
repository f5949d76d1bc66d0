// SPDX-License-Identifier: BSD-3-Clause
// DNS over TCP (RFC 7766): length-prefixed messages, several queries pipelined on one
// connection, answers written as they become ready (out of order), and limits that keep one
// client from holding more than its share:
// - an idle timeout that only a complete query or answer resets, and a read deadline for a
//   query once its first byte arrived (slowloris: a byte a second keeps nothing open);
// - back-pressure: a connection with too many unanswered queries or too much unsent data
//   stops being read until it drains; every queued byte counts against a per-connection and
//   a process-wide bound, and a client that lets either overflow is disconnected;
// - per-address and global connection caps, checked at accept (TcpConnections).
// Over TLS (DNS over TLS, RFC 7858) the same, with the handshake first: it must finish within
// the read timeout, and the bytes in and out go through a TlsStream; the caps, bounds and
// timeouts are the ones TCP has, counted together with TCP's.
// One worker's connections, used only from its thread.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "server/query_pipeline.h"
#include "server/tcp_shared.h"
#include "server/tls_stream.h"

struct ssl_ctx_st;

namespace nscache::server {

class TcpConnections;

class TcpConnection final : public EventHandler {
  public:
    // Queries longer than this are not queries: the connection is closed.
    static constexpr size_t kMaxQueryLength = 4096;
    // Unsent answer bytes above which the connection is not read until it drains...
    static constexpr size_t kReadPauseBytes = 64 << 10;
    // ...and above which the client, which is not reading, is disconnected (64 pending answers
    // of 4 KB fit; one address's connections together hold at most max-tcp-per-client times
    // this, a quarter of the process-wide bound with the defaults).
    static constexpr size_t kMaxUnsentBytes = 256 << 10;
    // Unsent bytes of all connections together (process-wide).
    static constexpr size_t kMaxQueuedBytesTotal = 64 << 20;
    static constexpr uint32_t kMaxPendingPerConnection = 64;

    // `tls` null: plain TCP; else DNS over TLS with that context.
    TcpConnection(TcpConnections& owner, EventLoop& loop, QueryPipeline& pipeline, int fd,
                  uint64_t id, const sockaddr_storage& peer, socklen_t peer_len,
                  ssl_ctx_st* tls = nullptr);
    ~TcpConnection();

    bool register_with_loop();
    void on_event(uint32_t events) override;
    // An answer that was pending: queue it and write what the socket takes.
    void send_answer(std::span<const uint8_t> answer);
    bool closed() const { return closed_; }
    // Handles no more queries; once those already read are answered and written, shuts its
    // side down and discards what the client still sends until the client closes (or the
    // idle timeout), so that no unread byte turns the close into a reset.
    void drain();
    const sockaddr_storage& peer() const { return peer_; }

  private:
    // TLS: steps the handshake; false when the connection closed.
    bool continue_handshake();
    // One read or write, through TLS or straight on the socket: > 0 bytes moved, 0 the peer
    // closed, < 0 with errno EAGAIN (nothing now) or another error.
    ssize_t receive(uint8_t* buffer, size_t size);
    ssize_t transmit(const uint8_t* data, size_t size);
    void read_queries();
    // After shutdown(SHUT_WR): reads and drops; closes at the client's EOF.
    void discard_until_eof();
    void process_buffer();
    // False (and the connection closed) when the answer would overflow a bound.
    bool queue(std::span<const uint8_t> answer);
    void flush();
    // flush(), then handle complete queries that waited for answers to drain.
    void write_and_resume();
    void update_interest();
    size_t unsent() const { return out_.size() - out_offset_; }
    // One timer per connection, at the earliest of its deadlines.
    void reschedule();
    void on_timer();
    void close_connection();

    TcpConnections& owner_;
    TcpShared& shared_;
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    const int fd_;
    const uint64_t id_;
    sockaddr_storage peer_;
    socklen_t peer_len_;

    std::unique_ptr<TlsStream> tls_;  // null: plain TCP
    // TLS wants the socket in the other direction than the caller asked: the read waits for
    // it to be writable, or the write for it to be readable.
    bool tls_read_wants_write_ = false;
    bool tls_write_wants_read_ = false;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    uint32_t interest_ = 0;
    std::vector<uint8_t> in_;
    size_t in_length_ = 0;
    std::vector<uint8_t> out_;
    size_t out_offset_ = 0;
    uint32_t pending_ = 0;
    bool processing_ = false;  // inside process_buffer(): answers are queued, not processed
    bool peer_closed_ = false;
    bool draining_ = false;    // drain(): no more queries
    bool write_shut_ = false;  // drained: our side is shut down, reads are discarded
    bool closed_ = false;
    uint64_t idle_since_ms_ = 0;        // last complete query in or answer out
    uint64_t partial_since_ms_ = 0;     // first byte of an incomplete query; 0: none
    uint64_t write_blocked_since_ = 0;  // when unsent data last made no progress; 0: none
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;
    uint64_t timer_at_ = 0;
    EventLoop::TimerHandle buffered_timer_ = EventLoop::kNoTimer;  // TLS plaintext left to read
};

// The connections of one worker, addressed by SlotTable ids (a pending answer for a
// connection that has since closed finds nothing).
class TcpConnections {
  public:
    TcpConnections(EventLoop& loop, QueryPipeline& pipeline, TcpShared& shared);

    // Takes ownership of an accepted socket; false (socket closed) over a connection cap.
    // `tls`: a DNS over TLS connection with that context (null: plain TCP).
    bool adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len, ssl_ctx_st* tls = nullptr);
    TcpConnection* find(uint64_t id);
    // Called by a connection that closed itself; it is destroyed on the loop's next turn.
    void release(uint64_t id);
    void close_all();
    TcpShared& shared() { return shared_; }
    // The worker's counters, for the TLS handshake counts (null in tests that set none).
    WorkerCounters* counters() const { return counters_; }
    void set_counters(WorkerCounters* counters) { counters_ = counters; }
    // This worker's limits (from its settings: a reload changes them).
    const TcpLimits& limits() const { return limits_; }
    void set_limits(const TcpLimits& limits) { limits_ = limits; }
    size_t size() const { return connections_.size(); }
    // Every connection drains (TcpConnection::drain); idle ones close now.
    void drain_all();

  private:
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    TcpShared& shared_;
    TcpLimits limits_;
    WorkerCounters* counters_ = nullptr;
    SlotTable<std::unique_ptr<TcpConnection>> connections_;
    std::vector<std::unique_ptr<TcpConnection>> graveyard_;
};

}  // namespace nscache::server
