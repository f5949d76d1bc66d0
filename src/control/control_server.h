// SPDX-License-Identifier: BSD-3-Clause
// The control socket (a unix stream socket, mode 0600 or 0660 for a group), the optional
// Prometheus endpoint and the optional health endpoint (GET /health, /ready), served by one thread
// of their own on an event loop, so nothing they do runs on a worker and no client can hold the
// others up: sockets never block, each client has a deadline from accept to the end of its answer,
// and each socket serves a bounded number of clients at once. One request per connection, a line
// in, text out (see docs/interfaces.md). Commands (flush, dump, load) run on the control thread.
//
// open() before privileges are dropped; start() and stop() from the thread that owns the
// server; execute() from any one thread at a time (the control thread once started).
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "cache/answer.h"
#include "cache/cache.h"
#include "cache/domain_ttl_caps.h"
#include "common/event_loop.h"
#include "common/listener.h"
#include "common/mailbox.h"
#include "common/result.h"
#include "common/slot_table.h"
#include "config/address.h"
#include "control/control_connection.h"
#include "control/health.h"
#include "control/peer_access.h"
#include "control/stats.h"
#include "control/takeover_session.h"

namespace nscache::control {

struct ControlOptions {
    std::string socket_path;
    std::string group;  // empty: mode 0600
    std::optional<SocketAddress> metrics_listen;
    std::vector<Cidr> metrics_allow;  // others are closed at accept; empty: loopback only
    // /health and /ready for any client; the metrics address itself: on the metrics socket.
    std::optional<SocketAddress> health_listen = std::nullopt;
    HealthSources health = {};
    std::string state_dir = "/var/lib/nscache";  // the only folder dump and load may use
    cache::TtlPolicy ttl_policy;                 // applied again to loaded entries
    // The [[forward]] rules' own caps, over ttl_policy for loaded entries (null: none).
    std::shared_ptr<const cache::DomainTtlCaps> ttl_caps = nullptr;
    // Runs on every flush (the NSS shared map forgets what it published).
    std::function<void()> after_flush;
    // `reload`: re-reads the configuration (on the main thread) and returns the reply text
    // ("ok\n..." or "error: FILE:LINE: ...\n"). Null: the command is refused.
    std::function<std::string()> reload;
    // `takeover` (nscache serve --takeover): what to hand over and how to drain afterwards.
    TakeoverHooks takeover;
    // From accept to the last byte of the answer; a slower client is closed.
    uint32_t client_deadline_ms = 5000;
    // The same for the metrics and health endpoints: shorter, so that idle connections (a
    // port scan, a stuck client) cannot hold the max_clients slots from probes for long.
    uint32_t http_deadline_ms = 2000;
    // Clients served at once per socket; more are turned away.
    size_t max_clients = 16;
    // A listening control socket given to this process (InheritedSockets "control"): served
    // instead of binding socket_path, and never unlinked (its owner keeps the path).
    int inherited_fd = -1;
    // The metrics endpoint's listening socket, handed over by a takeover: served instead of
    // binding metrics_listen (the caller checked it is that address).
    int inherited_metrics_fd = -1;
    // The same for the health endpoint (health_listen, when it is not metrics_listen).
    int inherited_health_fd = -1;
};

// What a reload may change in the control server.
struct ControlLiveOptions {
    std::optional<SocketAddress> metrics_listen;
    std::vector<Cidr> metrics_allow;
    std::optional<SocketAddress> health_listen;
    std::string state_dir;
    cache::TtlPolicy ttl_policy;
    std::shared_ptr<const cache::DomainTtlCaps> ttl_caps;
};

class ControlServer final : private ConnectionOwner {
  public:
    ControlServer(const ControlOptions& options, cache::Cache& cache, StatsSources stats);
    ~ControlServer();
    ControlServer(const ControlServer&) = delete;
    ControlServer& operator=(const ControlServer&) = delete;

    // Binds the sockets (before privileges are dropped). `owner_uid` is the daemon's user from
    // the switch on; `switches_user`: the process runs as another user until then.
    Result<void> open(uid_t owner_uid, bool switches_user = false);
    void start();
    // Duplicates of the listening sockets, for a takeover offer (any thread; -1 when none).
    int dup_control_fd() const;
    int dup_metrics_fd() const;
    int dup_health_fd() const;
    // Another instance serves the control socket now (takeover): destruction leaves the path
    // (any thread, before destruction).
    void release_path() { owns_path_.store(false, std::memory_order_relaxed); }
    // Another instance serves the control, metrics and health sockets now (a takeover's drain):
    // this one stops accepting on them, so probes, `reload` and `flush` reach the new one only;
    // the sockets stay open (the new one holds them too) and connections already accepted are
    // answered. A reload no longer moves them. Control thread only.
    void stop_listening();
    // Returns at once whatever clients are doing (a command already running finishes first);
    // open connections are closed.
    void stop();

    // The command interpreter, also used by tests: a request line in, the answer out.
    std::string execute(const std::string& request);

    // Any thread: applied on the control thread at its next wake-up (a changed metrics-listen
    // or health-listen is bound anew there; a port below 1024 fails once privileges are dropped,
    // and says so).
    void post_live_options(ControlLiveOptions options);

  private:
    std::string answer(ConnectionKind kind, const std::string& request) override;
    void closed(uint64_t id) override;
    bool wants_socket(ConnectionKind kind, const std::string& request) override;
    void adopt_socket(const std::string& request, int fd) override;
    void accept_control(int fd);
    void accept_http(ConnectionKind kind, int fd, const sockaddr_storage& peer);
    void adopt(ConnectionKind kind, int fd);
    std::string file_command(const std::string& command, const std::string& name);
    std::string http_answer(ConnectionKind kind, const std::string& head);
    void adopt_live_options();

    // An HTTP socket: metrics, or health (unbound when health-listen is metrics-listen).
    struct HttpEndpoint {
        std::optional<SocketAddress> address;
        int fd = -1;
        std::unique_ptr<Listener> listener;
    };
    HttpEndpoint& endpoint(ConnectionKind kind);
    // The address `kind` binds under `options_` (none for health on the metrics address).
    std::optional<SocketAddress> wanted_address(ConnectionKind kind) const;
    Result<void> bind_endpoint(ConnectionKind kind, const SocketAddress& address, int handed = -1);
    void close_endpoint(ConnectionKind kind);
    bool health_on_metrics() const;

    ControlOptions options_;
    cache::Cache& cache_;
    StatsSources stats_;
    ControlAccess access_;
    int control_fd_ = -1;
    std::atomic<bool> owns_path_{true};  // bound here (not inherited): unlinked at the end
    // Declared before what registers with it: destroyed after them.
    EventLoop loop_;
    Mailbox<ControlLiveOptions> live_pending_{loop_};  // from post_live_options()
    std::unique_ptr<Listener> control_listener_;
    HttpEndpoint metrics_;
    HttpEndpoint health_;
    SlotTable<std::unique_ptr<ControlConnection>> connections_;
    size_t clients_[3] = {0, 0, 0};  // open connections by ConnectionKind
    // At most one takeover at a time; once one has drained, later ones are refused.
    std::unique_ptr<TakeoverSession> takeover_;
    bool drained_ = false;
    bool listening_ = true;  // false after stop_listening()
    std::thread thread_;
};

}  // namespace nscache::control
