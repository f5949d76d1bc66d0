// SPDX-License-Identifier: BSD-3-Clause
// The main thread once the daemon runs: it waits for signals (SIGTERM/SIGINT end the run,
// SIGHUP reloads), for `nscache reload` requests from the control thread, and for changes to
// the files upstreams come from (resolv.conf or resolv-file, watched). A reload reads the
// configuration again the way start-up did; a config with an error is refused as a whole
// (FILE:LINE in the log and in the reply) and the old one stays. A good one becomes a new
// Settings snapshot posted to every worker, the NSS thread and the control server; the cache
// and every query in flight are kept. Options that only a restart can change are named in the
// log. Owns its own EventLoop; run() on the main thread, request_reload() and current() from
// any thread.
#pragma once

#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "cli/config_source.h"
#include "common/event_loop.h"
#include "common/file_watch.h"
#include "common/log.h"
#include "common/mutex.h"
#include "control/control_server.h"
#include "nscd/nscd_server.h"
#include "nssd/nss_server.h"
#include "server/settings.h"
#include "server/worker.h"
#include "upstream/resolver.h"
#include "upstream/routing.h"

namespace nscache {

// The log threshold a config names.
LogLevel log_level_of(LogThreshold threshold);

// Warnings about settings that work but hurt: a cache budget above the cgroup's memory bound,
// an `allow` beyond loopback without a rate limit. At start and at every reload.
void warn_about_settings(const server::Settings& settings);

// Entries a cache may hold that the routing answers itself (local names, the zones kept
// local, CHAOS identities): flushed at start after the cache file and at every reload.
void flush_local_answers(cache::Cache& cache, const upstream::Routing& routing);

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
    // `hosts`: the hosts file's entries `settings` was built with.
    Supervisor(const ConfigSource& source, server::SettingsPtr settings,
               std::unique_ptr<upstream::UpstreamRegistry> registry,
               std::vector<upstream::HostsEntry> hosts);
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    void attach(SupervisedParts parts) { parts_ = std::move(parts); }

    // Runs until SIGTERM or SIGINT (which the caller has blocked in every thread); returns it.
    int run();

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
    // Builds settings from `config` (routing included) and posts them everywhere.
    void publish(const Config& config, const char* why);
    void watch_files();

    const ConfigSource& source_;
    std::unique_ptr<upstream::UpstreamRegistry> registry_;
    std::vector<upstream::HostsEntry> hosts_;  // as last read: the routing's local names
    SupervisedParts parts_;
    EventLoop loop_;
    int signal_fd_ = -1;
    EventLoop::Registration signal_registration_ = EventLoop::kNoRegistration;
    FileWatch files_;
    int stop_signal_ = 0;

    mutable Mutex mu_;
    server::SettingsPtr settings_ NSCACHE_GUARDED_BY(mu_);

    // Reload requests from other threads, run on the loop.
    struct Request {
        std::promise<std::string> reply;
    };
    Mutex requests_mu_;
    std::vector<std::shared_ptr<Request>> requests_ NSCACHE_GUARDED_BY(requests_mu_);
    bool stopping_ NSCACHE_GUARDED_BY(requests_mu_) = false;
};

}  // namespace nscache
