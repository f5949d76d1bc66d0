// SPDX-License-Identifier: BSD-3-Clause
// One worker thread: an event loop over its own UDP and TCP listening sockets (SO_REUSEPORT),
// its TCP connections, its upstream queries and its completion queue. Workers share only the
// cache, the forwarding state and the settings. Only its own thread calls it, after
// construction, except post_settings() and request_stop() (any thread).
#pragma once

#include <atomic>
#include <memory>
#include <span>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/listener.h"
#include "common/mailbox.h"
#include "server/https_connection.h"
#include "server/query_pipeline.h"
#include "server/server_shared.h"
#include "server/tcp_connection.h"
#include "server/udp_socket.h"
#include "upstream/completion.h"
#include "upstream/resolver.h"

namespace nscache::server {

class Worker final : public ReplySender {
  public:
    // Takes ownership of the sockets. `clock`: the event loop's (a fake one in unit tests).
    Worker(uint32_t index, ServerShared& shared, WorkerCounters& counters,
           const std::vector<int>& udp_fds, const std::vector<int>& tcp_fds, SettingsPtr settings,
           const Clock& clock = system_clock());
    ~Worker();

    upstream::CompletionQueue& completion_queue() { return queue_; }

    // The thread body (its loop beats a heartbeat into `counters`): returns after
    // request_stop().
    void run();
    void request_stop() { loop_.request_stop(); }
    // Before run(): the listening sockets are shared with the other workers (inherited), so
    // they are polled with EPOLLEXCLUSIVE (one worker wakes per datagram or connection).
    void set_shared_listeners(bool shared) { shared_listeners_ = shared; }
    // Before run(): which of its listening sockets this process bound itself (the others were
    // given: systemd or another instance may hold them too).
    void set_private_listeners(const std::vector<int>& fds);
    // Before run(): takes ownership of its DNS over TLS and DNS over HTTPS listening sockets
    // (listen-tls, listen-https; always bound by this process).
    void set_encrypted_listeners(std::vector<int> tls_fds, std::vector<int> https_fds);
    // Any thread: the worker stops reading new queries (its UDP sockets and TCP listeners
    // leave its epoll set: what is queued in them stays there, for the next process when the
    // sockets are shared), answers every query it has read (those waiting on upstream
    // queries, those read on open TCP connections, which then close), and run() returns once
    // nothing is left or at `deadline_ms` on the loop's clock, whichever comes first.
    // `refuse_private`: no other process holds the private listeners (no takeover offer
    // duplicated them), so nothing queued in them would ever be read after this process: new
    // queries are refused at once instead (TCP listeners closed, UDP sockets as
    // UdpSocket::refuse_new_queries() says; what they had queued is still read and answered).
    void request_drain(uint64_t deadline_ms, bool refuse_private = false);
    // Loop thread: request_drain() came and nothing is left to answer (or its deadline
    // passed): run() returns at the end of this turn.
    bool drained() const { return drained_; }
    // Any thread: the worker switches to `settings` at its next wake-up.
    void post_settings(SettingsPtr settings) { mailbox_.post(std::move(settings)); }

    void send_reply(const PendingClient& client, std::span<const uint8_t> reply) override;

    // For tests that drive the worker turn by turn instead of run(): registers the sockets
    // (run() does it itself), then one turn of at most `max_wait_ms`.
    void start_listening();
    void run_once(int max_wait_ms);
    EventLoop& loop() { return loop_; }

  private:
    void on_wake();
    // The loop's heartbeat (common/readiness.h), then again in kHeartbeatIntervalMs: run() only.
    void beat();
    void adopt_posted_settings();
    void accept_tcp(int fd, const sockaddr_storage& peer, socklen_t length);
    void accept_tls(int fd, const sockaddr_storage& peer, socklen_t length);
    void accept_https(int fd, const sockaddr_storage& peer, socklen_t length);
    void start_drain();
    void check_drained();
    // The drain is over: the heartbeat says so (a finished loop is no stalled one for
    // /health while the other workers drain on) and run() returns.
    void finish_drain();

    SettingsPtr settings_;  // what this worker uses now; the pipeline points into it
    EventLoop loop_;
    Mailbox<SettingsPtr> mailbox_{loop_};
    WorkerCounters& counters_;
    upstream::CompletionQueue queue_;
    upstream::Resolver resolver_;
    QueryPipeline pipeline_;
    TcpConnections tcp_;
    HttpsConnections https_;
    std::vector<std::unique_ptr<UdpSocket>> udp_;
    std::vector<EventLoop::Registration> udp_registrations_;
    bool shared_listeners_ = false;
    // request_drain()'s deadline, from any thread; 0: none asked.
    std::atomic<uint64_t> drain_deadline_ms_{0};
    bool draining_ = false;
    bool drained_ = false;
    EventLoop::TimerHandle drain_timer_ = EventLoop::kNoTimer;
    std::atomic<bool> refuse_private_{false};  // request_drain()'s, set before the deadline
    std::vector<bool> udp_private_;            // by index of udp_
    std::vector<bool> tcp_private_;            // by index of tcp_fds_
    // UDP sockets still read during the drain (their queue, after refuse_new_queries()).
    std::vector<UdpSocket*> refusing_;
    std::vector<int> tcp_fds_;  // listening; closed after their listeners are gone (-1: closed)
    std::vector<std::unique_ptr<Listener>> acceptors_;
    std::vector<int> tls_fds_;                              // listening, DNS over TLS (-1: closed)
    std::vector<std::unique_ptr<Listener>> tls_acceptors_;  // by index of tls_fds_
    std::vector<int> https_fds_;  // listening, DNS over HTTPS (-1: closed)
    std::vector<std::unique_ptr<Listener>> https_acceptors_;  // by index of https_fds_
};

}  // namespace nscache::server
