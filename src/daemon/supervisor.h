// SPDX-License-Identifier: BSD-3-Clause
// The main thread once the daemon runs: it waits for signals (SIGTERM/SIGINT end the run,
// SIGHUP reloads), for `nscache reload` requests from the control thread (through a
// Mailbox), and for changes to the files upstreams and local names come from (resolv.conf
// or resolv-file, hosts-file; watched). A reload reads the configuration again the way
// start-up did; a config with an error is refused as a whole (FILE:LINE in the log and in the
// reply) and the old one stays. A good one goes through the same builder as at start
// (snapshot.h) and its snapshot is posted to every worker, the host fronts and the control
// server; the cache and every query in flight are kept. Options that only a restart can
// change are named in the log.
//
// Threads: run(), attach() and the constructor on the main thread; request_stop() from any
// thread; request_reload() from any other thread (it waits for the main thread's answer);
// current(), routing() and upstream_groups() from any thread. Guarantees:
// - Reloads run one at a time, on the main thread's loop only.
// - A reload request is answered exactly once: by the reload, or, once run() has returned,
//   at once with "error: the daemon is shutting down".
#pragma once

#include <atomic>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "common/clock.h"
#include "common/event_loop.h"
#include "common/file_watch.h"
#include "common/mailbox.h"
#include "common/mutex.h"
#include "config/config_source.h"
#include "control/control_server.h"
#include "daemon/snapshot.h"
#include "nscd/nscd_server.h"
#include "nssd/nss_server.h"
#include "server/settings.h"
#include "server/worker.h"
#include "upstream/resolver.h"
#include "upstream/routing.h"

namespace nscache::daemon {

// What a new Settings snapshot goes to.
struct SupervisedParts {
    std::vector<server::Worker*> workers;
    nssd::NssServer* nss = nullptr;
    nscd::NscdServer* nscd = nullptr;
    control::ControlServer* control = nullptr;
    cache::Cache* cache = nullptr;
    upstream::ResolverShared* resolver = nullptr;
};

class Supervisor final : public EventHandler {
  public:
    // `start`: the snapshot start-up built (with `registry`) from what `source` gave.
    // `clock`: the loop's (the file watch's settle and poll timers run on it).
    Supervisor(const ConfigSource& source, Snapshot start,
               std::unique_ptr<upstream::UpstreamRegistry> registry,
               const Clock& clock = system_clock());
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    void attach(SupervisedParts parts) { parts_ = std::move(parts); }

    // Runs until SIGTERM or SIGINT (which the caller has blocked in every thread); returns it.
    // Reload requests still posted are then answered "shutting down", later ones refused.
    int run();
    // One turn of run()'s loop, waiting up to `max_wait_ms`: signals, reload requests, the
    // file watch's timers. Tests drive the supervisor with it (and a fake clock); true once
    // SIGTERM or SIGINT was read.
    bool run_once(int max_wait_ms);

    // After run(), while the workers drain: runs the loop (signals only) until `done()`, a
    // further SIGTERM or SIGINT, or `deadline_ms` (monotonic), and says which ended it (the
    // log names the cause). Whoever makes done() true calls wake().
    enum class WaitEnd { Done, SecondSignal, Deadline };
    WaitEnd wait_until(const std::function<bool()>& done, uint64_t deadline_ms);
    // Any thread: wait_until() checks done() again.
    void wake() { loop_.wake(); }

    // Any thread: ends run() as SIGTERM does, so the same drain and exit follow (a takeover:
    // another instance serves the sockets now). run() then returns SIGTERM.
    void request_stop();
    // After run(): whether request_stop() rather than a signal ended it.
    bool stopped_by_request() const { return stopped_by_request_; }

    // Any thread but the main one: reloads now and returns the control reply text.
    std::string request_reload();
    // Any thread: the settings in force.
    server::SettingsPtr current() const;
    // Any thread: the routing in force, and its forward rules as stats groups.
    std::shared_ptr<const upstream::Routing> routing() const { return current()->routing; }
    std::vector<control::UpstreamGroupSource> upstream_groups() const;

    void on_event(uint32_t events) override;  // the signalfd

  private:
    std::string reload(const char* why);
    // resolv.conf (when it gives the upstreams) or the hosts file (hosts-file) changed.
    void watched_files_changed();
    // Builds the snapshot of `config` and `hosts` and posts it everywhere.
    // `tls`: the listeners' certificates read for `config` (null: keep the running ones).
    void publish(const Config& config, std::vector<upstream::HostsEntry> hosts, const char* why,
                 const server::TlsContexts* tls = nullptr);
    void watch_files();

    const ConfigSource& source_;
    std::unique_ptr<upstream::UpstreamRegistry> registry_;
    std::vector<upstream::HostsEntry> hosts_;  // as last read: the routing's local names
    SupervisedParts parts_;
    EventLoop loop_;
    // Reload requests from other threads, answered on the loop; closed once run() ends.
    Mailbox<std::promise<std::string>> requests_{loop_};
    int signal_fd_ = -1;
    EventLoop::Registration signal_registration_ = EventLoop::kNoRegistration;
    FileWatch files_;
    int stop_signal_ = 0;
    std::atomic<bool> stop_requested_{false};  // request_stop(), read on the loop
    bool stopped_by_request_ = false;
    int stop_signals_ = 0;  // SIGTERM and SIGINT read so far

    mutable Mutex mu_;
    server::SettingsPtr settings_ NSCACHE_GUARDED_BY(mu_);
};

}  // namespace nscache::daemon
