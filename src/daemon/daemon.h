// SPDX-License-Identifier: BSD-3-Clause
// The composition root of `nscache serve`, as named steps: each member function below does
// one job of start-up or shutdown, and run_daemon (cli/daemon.cpp) calls them in the order
// they are declared. The parts are members declared in the order they are built, so they are
// torn down in reverse (threads, workers, control, fronts, sockets, shared state, supervisor,
// TLS context, cache, runtime lock last). Main thread only.
//
// Guarantees:
// - A step that fails returns why (the caller logs it and exits with that step's code); what
//   the earlier steps built is released by the destructor, listening sockets included.
// - Sockets are bound and the cache file read before privileges are dropped; nothing listens
//   on the nscd socket before the drop (initgroups() must not wait on it); an inherited one,
//   which listens already, closes each connection at once until the front serves it.
// - "ready" is logged, and READY=1 sent, only once every thread runs.
// - The host front's thread is stopped before the protocols it serves are destroyed, whatever
//   step ran last (the destructor stops it first).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache/cache_file.h"
#include "common/counters.h"
#include "common/inherited_sockets.h"
#include "common/mutex.h"
#include "common/readiness.h"
#include "common/result.h"
#include "common/runtime_lock.h"
#include "config/config.h"
#include "config/config_source.h"
#include "control/control_server.h"
#include "daemon/nscd_refuser.h"
#include "daemon/privileges.h"
#include "daemon/supervisor.h"
#include "daemon/takeover.h"
#include "front/host_front.h"
#include "nscd/nscd_server.h"
#include "nssd/nss_server.h"
#include "server/listen_sockets.h"
#include "server/server_shared.h"
#include "server/settings.h"
#include "server/worker.h"
#include "upstream/resolver.h"
#include "upstream/tls_client.h"

namespace nscache::daemon {

// Blocks the signals the supervisor's signalfd reads (every thread started later inherits the
// mask) and ignores SIGPIPE. First of all, before any thread exists.
void block_daemon_signals();

class Daemon {
  public:
    // `config` is what `source` gave at start; both must outlive the Daemon.
    Daemon(const ConfigSource& source, const Config& config);
    ~Daemon();
    Daemon(const Daemon&) = delete;
    Daemon& operator=(const Daemon&) = delete;

    // The sockets this process was given (socket activation: LISTEN_FDS), which the opening
    // steps below take instead of binding (an error is a configuration error: exit 2).
    Result<void> take_inherited_sockets();
    // Where a takeover puts the sockets it received, before open_sockets().
    InheritedSockets& inherited_sockets() { return inherited_; }
    // --takeover: the running instance's descriptors (takeover.h); its sockets go into the
    // inherited sockets, which the steps below serve instead of binding. None running there:
    // start as without the flag.
    Result<void> take_over();
    // A second instance with the same runtime paths must touch nothing of the first (a
    // takeover holds the lock files it was handed: the lock passes without a gap).
    Result<void> acquire_lock();
    // The cache and the TLS context (an error here is a configuration error: exit 2).
    Result<void> build_state();
    // The first snapshot (snapshot.h), the supervisor, the state shared by every thread.
    void build_settings();
    // Every DNS listening socket, one per worker and address (SO_REUSEPORT), or the inherited
    // ones, shared by every worker.
    Result<void> open_sockets();
    // The `user` to run as, looked up while root.
    Result<void> find_user();
    // The NSS and nscd sockets and maps (bound; nscd does not listen yet).
    Result<void> open_fronts();
    // The control socket and the metrics endpoint; then inherited sockets nobody took are
    // named in the log and closed.
    Result<void> open_control();
    // `cache-file` into the cache, then what the routing answers itself flushed from it.
    void load_cache_file();
    // The state folder to `user`, then the switch (runtime folder stays root's).
    Result<void> drop_privileges();
    // Workers, control and the host front's thread; the supervisor learns what to post to.
    void start_threads();
    // The start-up summary, "ready", the configured log level, READY=1.
    void announce_ready();
    // After announce_ready(), with --takeover: the running instance is told to drain.
    void finish_takeover();
    // The supervisor's loop until SIGTERM or SIGINT (or a takeover by another instance), then
    // draining (/ready: 503), "shutting down" and STOPPING=1.
    void run();
    // The drain: the host front first (nscd, whose clients drop the map at once, then NSS:
    // both stop with the front's thread), then every worker stops reading and answers what
    // it has read (bounded by query-timeout and a margin; a second SIGTERM or SIGINT stops
    // them at once), then control, the metrics and the health endpoint (/ready 503), which
    // answer until then.
    void stop_threads();
    // `cache-file` written from the cache.
    void save_cache_file();

  private:
    // The control thread's side of a takeover by another instance (takeover_offer.cpp).
    Result<std::vector<control::NamedFd>> takeover_offer();
    // The listening sockets and lock files, duplicated under offer_mu_ (none once stopping).
    std::optional<std::vector<control::NamedFd>> duplicate_for_offer();
    void release_paths_for_takeover();
    void drain_for_takeover();
    // The cache a running instance handed over, into the cache (under `options`: what the
    // routing answers itself left out, the rules' caps): true if loaded.
    bool load_handed_cache(const cache::LoadOptions& options);

    const ConfigSource& source_;
    const Config& config_;

    InheritedSockets inherited_;
    std::unique_ptr<Handover> handover_;  // --takeover, until finish_takeover()
    uint64_t lock_wait_ms_ = 0;           // acquire_lock() retries this long (take_over)
    // The duplicates of a takeover offer (control thread) and the start of the drain (main
    // thread) exclude each other: an offer never duplicates a descriptor the drain is closing.
    // Held for the dups and a flag, never for the cache's dump.
    Mutex offer_mu_;
    bool stopping_ NSCACHE_GUARDED_BY(offer_mu_) = false;
    // An offer duplicated the DNS sockets: another process may hold them from then on.
    bool offer_made_ NSCACHE_GUARDED_BY(offer_mu_) = false;
    // At the drain: no other process holds the sockets this one bound (no offer was made),
    // so the drain refuses new queries on them (Worker::request_drain).
    bool own_sockets_private_ = true;
    RuntimeLock runtime_lock_;
    uint64_t started_ms_ = 0;
    // Starting, ready (announce_ready), draining (run's end): /ready tells it.
    Readiness readiness_;
    std::unique_ptr<cache::Cache> cache_;
    // DNS over TLS: one context for every worker (a reload may add tls:// upstreams).
    std::unique_ptr<upstream::TlsClient> tls_;
    server::TlsContexts listener_tls_;  // the DoT and DoH listeners' certificate, as read at start
    server::SettingsPtr settings_;      // the snapshot at start
    control::ControlLiveOptions control_;  // its control part
    std::unique_ptr<Supervisor> supervisor_;
    std::unique_ptr<upstream::ResolverShared> resolver_shared_;
    std::unique_ptr<server::ServerShared> shared_;
    server::ListenSockets sockets_;
    bool sockets_given_ = false;  // to the workers, which close them
    std::optional<UserIds> user_;
    // One counter block per worker, one for the host front's thread, one spare (open_fronts).
    std::unique_ptr<WorkerCounters[]> counters_;
    // The NSS and nscd protocols are served on the front's thread: declared after it, so
    // destroyed before it.
    std::unique_ptr<front::HostFront> host_front_;
    std::unique_ptr<nssd::NssServer> nss_;
    std::unique_ptr<nscd::NscdServer> nscd_;
    std::unique_ptr<control::ControlServer> control_server_;
    std::vector<std::unique_ptr<server::Worker>> workers_;
    std::vector<std::thread> threads_;
    std::atomic<unsigned> workers_done_{0};  // worker threads whose run() returned
    // An inherited nscd socket while the daemon's own user lookups may ask it (until the
    // host front accepts on it).
    NscdRefuser nscd_refuser_;
};

}  // namespace nscache::daemon
