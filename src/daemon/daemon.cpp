// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#include "cache/cache_file.h"
#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "common/sd_notify.h"
#include "daemon/snapshot.h"
#include "upstream/upstream_set.h"

namespace nscache::daemon {
namespace {

cache::CacheConfig cache_config(const Config& c) {
    return cache::CacheConfig{.budget_bytes = c.cache_size,
                              .stale_ttl_s = c.serve_stale ? c.stale_ttl_s : 0};
}

// Every socket this instance would take from another one configured alike.
std::vector<std::string> runtime_paths(const Config& c) {
    std::vector<std::string> paths{c.control};
    if (c.nss) paths.push_back(c.nss_socket);
    if (!c.nscd_socket.empty()) paths.push_back(c.nscd_socket);
    return paths;
}

// Creates the state folder if missing and hands it to the daemon's user, through a descriptor
// of the folder itself (never a path that could lead elsewhere).
void give_state_dir(const std::string& state_dir, const UserIds& user) {
    if (state_dir.empty()) return;
    if (mkdir(state_dir.c_str(), 0750) != 0 && errno != EEXIST) {
        log_warning("cannot create state-dir %s: %s", state_dir.c_str(), std::strerror(errno));
        return;
    }
    const int fd = open(state_dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchown(fd, user.uid, user.gid) != 0) {
        log_warning("cannot give state-dir %s to the daemon's user: %s", state_dir.c_str(),
                    std::strerror(errno));
    }
    if (fd >= 0) close(fd);
}

// A front's socket folder, then the front's own open().
template <typename Front>
Result<void> open_front(Front& front, const std::string& socket_path) {
    if (!make_parent_folder(socket_path)) {
        return Error{"cannot create the folder of " + socket_path};
    }
    return front.open();
}

}  // namespace

void block_daemon_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set, s);
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
    signal(SIGPIPE, SIG_IGN);
}

Daemon::Daemon(const ConfigSource& source, const Config& config)
    : source_(source), config_(config) {}

Daemon::~Daemon() {
    // The front's thread serves nss_ and nscd_, which go before it (member order): it stops
    // first, whatever step ran last (stop() is a no-op when it never started or has stopped).
    if (host_front_) host_front_->stop();
    if (!threads_.empty()) stop_threads();
    // Until the workers own them, the listening sockets are ours to close (a step failed).
    if (!sockets_given_) sockets_.close_all();
}

Result<void> Daemon::acquire_lock() {
    if (auto locked = runtime_lock_.acquire(runtime_paths(config_)); !locked) return locked;
    return {};
}

Result<void> Daemon::build_state() {
    started_ms_ = monotonic_ms();
    // Debug from the start when asked; a quieter level only after "ready".
    if (config_.log_level == LogThreshold::Debug) set_log_threshold(LogLevel::Debug);
    cache_ = std::make_unique<cache::Cache>(cache_config(config_));
    std::string tls_error;
    // The system trust store only when DNS over TLS is configured now: otherwise the first
    // TLS connection (after a reload adds one) loads it.
    auto is_tls = [](const UpstreamAddress& u) { return u.tls; };
    bool tls_now = std::any_of(config_.upstreams.begin(), config_.upstreams.end(), is_tls);
    for (const ForwardZone& f : config_.forwards) {
        tls_now = tls_now || std::any_of(f.upstreams.begin(), f.upstreams.end(), is_tls);
    }
    tls_ = upstream::TlsClient::create(
        upstream::TlsSettings{
            .ca_file = config_.tls_ca_file, .auth = config_.tls_auth, .system_store_now = tls_now},
        tls_error);
    if (!tls_) return Error{tls_error};
    return {};
}

void Daemon::build_settings() {
    auto registry = std::make_unique<upstream::UpstreamRegistry>();
    std::vector<upstream::HostsEntry> hosts = read_hosts(config_);
    const uint32_t queries = upstream_queries_within_limits(config_, /*warn=*/true);
    Snapshot start =
        build_snapshot(config_, std::move(hosts), *registry, queries, /*previous=*/nullptr);
    settings_ = start.settings;
    control_ = start.control;
    supervisor_ = std::make_unique<Supervisor>(source_, std::move(start), std::move(registry));
    resolver_shared_.reset(new upstream::ResolverShared{settings_->resolver, *cache_, {}, {}});
    resolver_shared_->tls = tls_.get();
    resolver_shared_->routing_in_force.store(settings_->routing.get(), std::memory_order_release);
    shared_.reset(new server::ServerShared{config_, *cache_, *resolver_shared_, {}});
    warn_about_settings(*settings_);
}

Result<void> Daemon::open_sockets() {
    return server::open_listen_sockets(config_, config_.threads, sockets_);
}

Result<void> Daemon::find_user() {
    if (config_.user.empty()) return {};
    Result<UserIds> found = daemon::find_user(config_.user);
    if (!found) return Error{found.error()};
    user_ = *found;
    return {};
}

Result<void> Daemon::open_fronts() {
    const unsigned workers = config_.threads;
    // One counter block per worker and one for the host front's thread (NSS and nscd sockets;
    // it forwards like a worker, its resolver queue index after the workers'). The spare last
    // block stays zero: stats sum every block.
    counters_.reset(new WorkerCounters[workers + 2]);
    if (!config_.nss && config_.nscd_socket.empty()) return {};
    host_front_ = std::make_unique<front::HostFront>(*resolver_shared_, counters_[workers], workers,
                                                     settings_);
    // nscd first: the front stops its protocols in the order added (see stop_threads).
    if (!config_.nscd_socket.empty()) {
        nscd::NscdOptions o;
        o.socket_path = config_.nscd_socket;
        o.proxy_other_databases = config_.nscd_proxy_other_databases;
        o.prefetch = config_.prefetch;
        o.max_connections_per_user = config_.max_connections_per_user;
        o.map.data_size = static_cast<uint32_t>(config_.nscd_map_size);
        nscd_ = std::make_unique<nscd::NscdServer>(*host_front_, o);
    }
    if (config_.nss) {
        nssd::NssOptions o;
        o.socket_path = config_.nss_socket;
        o.max_connections_per_user = config_.max_connections_per_user;
        nss_ = std::make_unique<nssd::NssServer>(*host_front_, o);
    }
    // Each front's socket folder, then the socket (NSS first, as before).
    if (nss_) {
        if (auto opened = open_front(*nss_, config_.nss_socket); !opened) return opened;
    }
    if (nscd_) {
        if (auto opened = open_front(*nscd_, config_.nscd_socket); !opened) return opened;
    }
    return {};
}

Result<void> Daemon::open_control() {
    control::ControlOptions options{.socket_path = config_.control,
                                    .group = config_.control_group,
                                    .metrics_listen = control_.metrics_listen,
                                    .metrics_allow = control_.metrics_allow,
                                    .state_dir = control_.state_dir,
                                    .ttl_policy = control_.ttl_policy,
                                    .after_flush = nullptr,
                                    .reload = [this] { return supervisor_->request_reload(); }};
    // A flush forgets published NSS answers and cached resolution failures too.
    options.after_flush = [this] {
        if (nss_) nss_->invalidate_map();
        if (nscd_) nscd_->invalidate_map();
        resolver_shared_->failures.clear_all();
    };
    control_server_ = std::make_unique<control::ControlServer>(
        options, *cache_,
        control::StatsSources{std::span<const WorkerCounters>(counters_.get(), config_.threads + 2),
                              cache_.get(), [this] { return supervisor_->upstream_groups(); },
                              started_ms_, &resolver_shared_->tier_health});
    if (auto opened = control_server_->open(user_ ? user_->uid : geteuid()); !opened) return opened;
    return {};
}

void Daemon::load_cache_file() {
    const std::string& path = config_.cache_file;
    if (!path.empty() && access(path.c_str(), F_OK) == 0) {
        // A file from another version or config may hold answers for what is local now: they
        // are left out as it loads (the cache is empty before), instead of flushed after by
        // a pass over the filled cache.
        const cache::NameSet local = local_answer_names(*settings_->routing);
        const uint64_t started = monotonic_ms();
        // No worker runs yet: the cache is the loader's alone (one pass over the file).
        const Result<uint64_t> loaded =
            cache::load_cache(*cache_, path, settings_->resolver.ttl, started, wall_ms(),
                              cache::LoadOptions{.leave_out = &local, .cache_is_private = true});
        if (loaded) {
            log_info("loaded %llu entries from %s in %llu ms",
                     static_cast<unsigned long long>(*loaded), path.c_str(),
                     static_cast<unsigned long long>(monotonic_ms() - started));
        } else {
            log_warning("cache file skipped, starting empty: %s", loaded.error().c_str());
        }
    } else if (!path.empty()) {
        log_info("no cache file %s yet: starting empty", path.c_str());
    }
}

Result<void> Daemon::drop_privileges() {
    if (!user_) return {};
    // The runtime folder stays root's: every socket in it is bound by now, and a folder the
    // daemon's user could write would let that user plant links for the next start (which
    // runs as root) to follow. The state folder is the user's: dumps and the cache file are
    // written there after the switch (and read with O_NOFOLLOW before it).
    give_state_dir(config_.state_dir, *user_);
    if (auto dropped = daemon::drop_privileges(config_.user, *user_); !dropped) return dropped;
    log_info("running as user %s", config_.user.c_str());
    return {};
}

void Daemon::start_threads() {
    for (unsigned i = 0; i < config_.threads; ++i) {
        workers_.push_back(std::make_unique<server::Worker>(
            i, *shared_, counters_[i], sockets_.udp[i], sockets_.tcp[i], settings_));
        resolver_shared_->queues.push_back(&workers_.back()->completion_queue());
    }
    sockets_given_ = true;
    if (host_front_) resolver_shared_->queues.push_back(&host_front_->completion_queue());
    for (auto& w : workers_) threads_.emplace_back([&w] { w->run(); });
    control_server_->start();
    // The nscd socket listens only now: the privilege drop's initgroups() must not wait on it.
    if (host_front_) host_front_->start();
    SupervisedParts parts{
        {}, nss_.get(), nscd_.get(), control_server_.get(), cache_.get(), resolver_shared_.get()};
    for (auto& w : workers_) parts.workers.push_back(w.get());
    supervisor_->attach(std::move(parts));
}

void Daemon::announce_ready() {
    log_info("%u workers, cache %zu bytes, %zu upstreams", config_.threads, config_.cache_size,
             settings_->routing->upstream_count());
    if (config_.shared_cache.enabled()) {
        const auto& sc = config_.shared_cache;
        log_info(
            "shared cache: %s %s, timeout %ums, key prefix '%s'%s",
            sc.redis ? "Redis" : "Redis Cluster",
            sc.redis ? sc.redis->to_string().c_str() : sc.redis_cluster.front().to_string().c_str(),
            sc.timeout_ms, sc.key_prefix.c_str(), sc.write ? "" : ", read-only");
    }
    log_info("ready");
    // After the lines harnesses and operators wait for (listening on..., ready), whatever the
    // level: log-level = "warning" quiets what follows, not the start-up contract.
    set_log_threshold(log_level_of(config_.log_level));
    // Sockets bound, cache file loaded, workers running: now systemd may start what waits for
    // name service (nss-lookup.target).
    sd_notify("READY=1");
}

void Daemon::run() {
    const int signal_number = supervisor_->run();
    log_info("shutting down (%s)", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    sd_notify("STOPPING=1");
}

void Daemon::stop_threads() {
    // First of all: glibc's clients drop the nscd map at once and use NSS while we stop (the
    // front stops nscd, its first protocol, first).
    if (host_front_) host_front_->stop();
    control_server_->stop();
    for (auto& w : workers_) w->request_stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
    nss_.reset();
    nscd_.reset();
    host_front_.reset();
    workers_.clear();
}

void Daemon::save_cache_file() {
    const std::string& path = config_.cache_file;
    if (path.empty()) return;
    const Result<uint64_t> dumped = cache::dump_cache(*cache_, path, monotonic_ms(), wall_ms());
    if (dumped) {
        log_info("saved %llu entries to %s", static_cast<unsigned long long>(*dumped),
                 path.c_str());
    } else {
        log_error("cache not saved: %s", dumped.error().c_str());
    }
}

}  // namespace nscache::daemon
