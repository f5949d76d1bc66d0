// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

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

SocketAddress local_address(int fd) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return SocketAddress{};
    return SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&ss), len);
}

// The path a unix socket is bound to ("" if none).
std::string unix_path(int fd) {
    sockaddr_un addr{};
    socklen_t len = sizeof addr;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
        addr.sun_family != AF_UNIX || len <= offsetof(sockaddr_un, sun_path)) {
        return {};
    }
    return std::string(addr.sun_path,
                       strnlen(addr.sun_path, len - offsetof(sockaddr_un, sun_path)));
}

// How long a --takeover whose running instance went away before its offer waits for that
// instance's lock (its drain, then its cache file's save).
constexpr uint64_t kGoneLockWaitMs = 60'000;

// What a drain may take past query-timeout: the last answers written, the loops' turns.
constexpr uint64_t kDrainMarginMs = 1000;

// What the cache file's save may take: a floor, and per entry ten times the dump's measured
// cost (about 0.7 us per entry, bench/RESULTS.md) for a slow or busy disk.
constexpr uint64_t kSaveFloorMs = 10'000;
constexpr uint64_t kSavePerEntryUs = 7;

// Under systemd, asks for `ms` more before the stop timeout (TimeoutStopSec=) may kill us:
// the drain and the save can outlast it, and a SIGKILL during the save loses the cache file's
// update. No effect without $NOTIFY_SOCKET.
void extend_stop_timeout(uint64_t ms) {
    const std::string state = "EXTEND_TIMEOUT_USEC=" + std::to_string(ms * 1000);
    sd_notify(state.c_str());
}

// The example config up to issue 18 had an active `nscd-other-databases = "proxy"`, and an
// upgrade keeps the installed one: that key is now the default of the database keys, so
// such a host gets nothing cached, which it must hear about (the meaning stays: it was set).
void warn_other_databases_proxy(const Config& c) {
    if (!c.nscd_other_databases_set || !c.nscd_proxy_other_databases) return;
    std::vector<const char*> uncached;
    if (c.nscd_passwd.empty()) uncached.push_back("passwd");
    if (c.nscd_group.empty()) uncached.push_back("group");
    if (c.nscd_services.empty()) uncached.push_back("services");
    if (uncached.empty()) return;
    std::string list;
    for (size_t i = 0; i < uncached.size(); ++i) {
        if (i > 0) list += i + 1 == uncached.size() ? " and " : ", ";
        list += uncached[i];
    }
    log_warning(
        "nscd-other-databases = \"proxy\" makes %s uncached; remove it (or set "
        "nscd-passwd/-group/-services) to cache them",
        list.c_str());
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
    nscd_refuser_.stop();  // before the socket it accepts on is closed
    // The front's thread serves nss_ and nscd_, which go before it (member order): it stops
    // first, whatever step ran last (stop() is a no-op when it never started or has stopped).
    if (host_front_) host_front_->stop();
    if (!threads_.empty()) stop_threads();
    // Until the workers own them, the listening sockets are ours to close (a step failed).
    if (!sockets_given_) sockets_.close_all();
}

Result<void> Daemon::take_inherited_sockets() {
    Result<InheritedSockets> given = InheritedSockets::from_environment();
    if (!given) return Error{given.error()};
    inherited_ = std::move(*given);
    if (!inherited_.empty()) {
        log_info("socket activation: %zu sockets given", inherited_.size());
    }
    const bool looks_up_users = !config_.user.empty() || !config_.control_group.empty();
    for (const auto& [name, fd] : inherited_.entries()) {
        if (name == InheritedSockets::kNscd && looks_up_users && !config_.nscd_socket.empty()) {
            nscd_refuser_.start(fd);
        }
    }
    return {};
}

Result<void> Daemon::take_over() {
    if (!inherited_.empty()) return Error{"--takeover: the process was given sockets already"};
    auto handover = std::make_unique<Handover>();
    // Root, this process's user, or `user`: who may have bound the control socket (a chain of
    // takeovers passes on the socket root bound, with root's credentials).
    std::vector<uid_t> trusted{0, geteuid()};
    if (!config_.user.empty()) {
        if (Result<UserIds> found = daemon::find_user(config_.user)) trusted.push_back(found->uid);
    }
    Result<Handover::Answer> got = handover->request(config_.control, trusted);
    if (!got) return Error{got.error()};
    if (*got == Handover::Answer::NoInstance) {
        log_info("--takeover: no instance answers on %s: starting as a first instance",
                 config_.control.c_str());
        return {};
    }
    if (*got == Handover::Answer::Gone) {
        // Exiting 1 would leave no instance at all once it is gone.
        log_warning(
            "--takeover: the instance on %s went away before its offer: starting as a first "
            "instance once its lock is free",
            config_.control.c_str());
        lock_wait_ms_ = kGoneLockWaitMs;
        return {};
    }
    for (const char* name : {InheritedSockets::kDnsUdp, InheritedSockets::kDnsTcp}) {
        for (int fd : handover->take_all(name)) inherited_.add(name, fd);
    }
    // A local socket is served only at the path configured here (another path: this
    // instance binds its own, and the old one's stays with it).
    const std::pair<const char*, std::string> local[] = {
        {InheritedSockets::kControl, config_.control},
        {InheritedSockets::kNss, config_.nss ? config_.nss_socket : std::string()},
        {InheritedSockets::kNscd, config_.nscd_socket}};
    for (const auto& [name, path] : local) {
        const int fd = handover->take(name);
        if (fd < 0) continue;
        if (!path.empty() && unix_path(fd) == path) {
            inherited_.add(name, fd);
        } else {
            log_info("--takeover: the running instance's %s socket (%s) is not configured here",
                     name, unix_path(fd).c_str());
            close(fd);
        }
    }
    if (auto valid = inherited_.validate(); !valid) {
        return Error{"--takeover: the running instance handed over " + valid.error()};
    }
    log_info("--takeover: received %zu sockets and the cache of the running instance",
             inherited_.size());
    handover_ = std::move(handover);
    return {};
}

Result<void> Daemon::acquire_lock() {
    std::map<std::string, int>* handed = handover_ ? &handover_->locks() : nullptr;
    // An instance going away (take_over) holds its lock until it exits: after its drain
    // (query-timeout and a margin) and its cache file's save.
    const uint64_t give_up = monotonic_ms() + lock_wait_ms_;
    for (;;) {
        Result<void> locked = runtime_lock_.acquire(runtime_paths(config_), handed);
        if (locked || monotonic_ms() >= give_up) return locked;
        usleep(100'000);
    }
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
    // The listeners' key is read here, as root, before the privilege drop (a reload reads it
    // again as the daemon's user: see README, DNS over TLS and HTTPS).
    std::vector<std::string> warnings;
    if (!server::load_tls_contexts(config_, listener_tls_, tls_error, warnings)) {
        return Error{tls_error};
    }
    for (const std::string& w : warnings) log_warning("%s", w.c_str());
    return {};
}

void Daemon::build_settings() {
    auto registry = std::make_unique<upstream::UpstreamRegistry>();
    std::vector<upstream::HostsEntry> hosts = read_hosts(config_);
    const uint32_t queries = upstream_queries_within_limits(config_, /*warn=*/true);
    Snapshot start = build_snapshot(config_, std::move(hosts), *registry, queries,
                                    /*previous=*/nullptr, &listener_tls_);
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
    // Socket activation or a takeover: the given sockets, and what `listen` adds to them.
    return server::open_listen_sockets(config_, config_.threads, sockets_, &inherited_);
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
        o.users.map.data_size = o.map.data_size;
        // nscd-other-databases, when set, is the default of each database's key.
        const std::string fallback = !config_.nscd_other_databases_set    ? "auto"
                                     : config_.nscd_proxy_other_databases ? "proxy"
                                                                          : "decline";
        auto policy = [&](const std::string& key) {
            return nscd::parse_db_policy(key.empty() ? fallback : key)
                .value_or(nscd::DbPolicy::automatic);
        };
        o.users.passwd = policy(config_.nscd_passwd);
        o.users.group = policy(config_.nscd_group);
        o.users.services = policy(config_.nscd_services);
        warn_other_databases_proxy(config_);
        o.users.positive_ttl_s = config_.nscd_positive_ttl;
        o.users.negative_ttl_s = config_.nscd_negative_ttl;
        o.inherited_fd = inherited_.take_one(InheritedSockets::kNscd).value_or(-1);
        nscd_ = std::make_unique<nscd::NscdServer>(*host_front_, o);
    }
    if (config_.nss) {
        nssd::NssOptions o;
        o.socket_path = config_.nss_socket;
        o.max_connections_per_user = config_.max_connections_per_user;
        o.inherited_fd = inherited_.take_one(InheritedSockets::kNss).value_or(-1);
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
                                    .ttl_caps = control_.ttl_caps,
                                    .after_flush = nullptr,
                                    .reload = [this] { return supervisor_->request_reload(); },
                                    .takeover = {}};
    options.takeover.offer = [this] { return takeover_offer(); };
    options.takeover.handing_over = [this] { release_paths_for_takeover(); };
    options.takeover.drain = [this] { drain_for_takeover(); };
    if (handover_) {
        // Served only if it is the endpoint configured now.
        // Served only if it is the endpoint configured now, and a listening TCP socket.
        const auto handed_endpoint = [this](const char* name,
                                            const std::optional<SocketAddress>& wanted,
                                            int& served) -> Result<void> {
            const int fd = handover_->take(name);
            if (fd < 0) return {};
            if (auto valid = InheritedSockets::validate_one(name, fd); !valid) {
                close(fd);
                return Error{"--takeover: the running instance handed over " + valid.error()};
            }
            if (wanted && local_address(fd) == *wanted) {
                served = fd;
            } else {
                close(fd);
            }
            return {};
        };
        if (auto taken = handed_endpoint(InheritedSockets::kMetrics, control_.metrics_listen,
                                         options.inherited_metrics_fd);
            !taken) {
            return taken;
        }
        // On the metrics address, the health endpoint is the metrics socket.
        if (auto taken = handed_endpoint(InheritedSockets::kHealth,
                                         control_.health_listen == control_.metrics_listen
                                             ? std::nullopt
                                             : control_.health_listen,
                                         options.inherited_health_fd);
            !taken) {
            return taken;
        }
    }
    options.inherited_fd = inherited_.take_one(InheritedSockets::kControl).value_or(-1);
    // /health reads the workers' heartbeats (the host front's thread has none).
    options.health_listen = control_.health_listen;
    options.health = {&readiness_,
                      std::span<const WorkerCounters>(counters_.get(), config_.threads)};
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
    const bool switches_user = user_ && user_->uid != geteuid();
    if (auto opened = control_server_->open(user_ ? user_->uid : geteuid(), switches_user);
        !opened) {
        return opened;
    }
    // A socket the config does not use (nscd-socket = "", nss = false) is not served: closed
    // here, it stays open in its owner (systemd), which queues clients nobody answers.
    for (const auto& [name, fd] : inherited_.entries()) {
        log_warning("inherited socket '%s' (descriptor %d) not used: its option is off",
                    name.c_str(), fd);
    }
    inherited_.close_all();
    return {};
}

void Daemon::load_cache_file() {
    const std::string& path = config_.cache_file;
    // A cache from another version or config may hold answers for what is local now: they
    // are left out as it loads (the cache is empty before), instead of flushed after by a
    // pass over the filled cache.
    const cache::NameSet local = local_answer_names(*settings_->routing);
    // Entries of a rule's domains take its caps, as its upstream's answers would.
    const cache::DomainTtlCaps caps = rule_ttl_caps(*settings_->routing);
    // No worker runs yet: the cache is the loader's alone (one pass over the file or memfd).
    const cache::LoadOptions options{
        .leave_out = &local, .ttl_caps = &caps, .cache_is_private = true};
    // The running instance's cache is newer than any file it saved.
    if (load_handed_cache(options)) return;
    if (!path.empty() && access(path.c_str(), F_OK) == 0) {
        const uint64_t started = monotonic_ms();
        const Result<uint64_t> loaded =
            cache::load_cache(*cache_, path, settings_->resolver.ttl, started, wall_ms(), options);
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
        workers_.back()->set_shared_listeners(sockets_.shared);
        workers_.back()->set_private_listeners(sockets_.bound_here);
        workers_.back()->set_encrypted_listeners(sockets_.tls[i], sockets_.https[i]);
        resolver_shared_->queues.push_back(&workers_.back()->completion_queue());
    }
    sockets_given_ = true;
    if (host_front_) resolver_shared_->queues.push_back(&host_front_->completion_queue());
    for (auto& w : workers_) {
        threads_.emplace_back([this, &w] {
            w->run();
            workers_done_.fetch_add(1, std::memory_order_acq_rel);
            supervisor_->wake();
        });
    }
    control_server_->start();
    // The nscd socket listens only now: the privilege drop's initgroups() must not wait on it.
    nscd_refuser_.stop();
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
    readiness_.set_ready();
    log_info("ready");
    // After the lines harnesses and operators wait for (listening on..., ready), whatever the
    // level: log-level = "warning" quiets what follows, not the start-up contract.
    set_log_threshold(log_level_of(config_.log_level));
    // Sockets bound, cache file loaded, workers running: now systemd may start what waits for
    // name service (nss-lookup.target).
    sd_notify("READY=1");
}

void Daemon::finish_takeover() {
    if (!handover_) return;
    const Result<void> confirmed = handover_->confirm_ready();
    handover_.reset();  // what no step served is closed
    if (!confirmed) {
        log_warning("takeover: %s; serving beside it", confirmed.error().c_str());
        return;
    }
    runtime_lock_.claim_pid();
    log_info("takeover: the previous instance drains; its sockets are served here");
}

void Daemon::run() {
    const int signal_number = supervisor_->run();
    readiness_.set_draining();  // before anything stops: probes see 503 throughout
    {
        // No offer from here on: the drain closes the sockets an offer would duplicate.
        MutexLock lock(offer_mu_);
        stopping_ = true;
        own_sockets_private_ = !offer_made_;
    }
    log_info("shutting down (%s)", supervisor_->stopped_by_request() ? "taken over"
                                   : signal_number == SIGINT         ? "SIGINT"
                                                                     : "SIGTERM");
    sd_notify("STOPPING=1");
}

void Daemon::stop_threads() {
    // First of all: glibc's clients drop the nscd map at once and use NSS while we stop (the
    // front stops nscd, its first protocol, first).
    if (host_front_) host_front_->stop();
    // Queries already read are answered: upstream queries within query-timeout, and a margin
    // for the answers to be written.
    const uint64_t deadline = monotonic_ms() + config_.query_timeout_ms + kDrainMarginMs;
    // The wait below ends at most a margin past the workers' deadline; a margin more for the
    // threads' joins and the control server's stop.
    extend_stop_timeout(config_.query_timeout_ms + 3 * kDrainMarginMs);
    log_info("draining: no new queries read, answering those read (at most %u ms)",
             static_cast<unsigned>(config_.query_timeout_ms + kDrainMarginMs));
    // The sockets it bound itself are refused at once (clients fail over now, instead of
    // after their timeout) unless a takeover offer gave them to another process.
    for (auto& w : workers_) w->request_drain(deadline, own_sockets_private_);
    const Supervisor::WaitEnd end = supervisor_->wait_until(
        [this] { return workers_done_.load(std::memory_order_acquire) == workers_.size(); },
        deadline + kDrainMarginMs);
    if (end == Supervisor::WaitEnd::Done) {
        log_info("drained in %llu ms",
                 static_cast<unsigned long long>(monotonic_ms() + config_.query_timeout_ms +
                                                 kDrainMarginMs - deadline));
    } else if (end == Supervisor::WaitEnd::SecondSignal) {
        // Documented: a second SIGTERM stops at once; the cache file is still saved.
        log_warning("drain cut short by a second signal: queries not yet answered are dropped");
    } else {
        // A worker past its own deadline (each stops at `deadline`): a wedged loop.
        log_warning(
            "drain not done %u ms after its deadline: stopping the workers, queries "
            "not yet answered are dropped",
            static_cast<unsigned>(kDrainMarginMs));
    }
    for (auto& w : workers_) w->request_stop();
    for (auto& t : threads_) t.join();
    control_server_->stop();
    threads_.clear();
    nss_.reset();
    nscd_.reset();
    host_front_.reset();
    workers_.clear();
}

void Daemon::save_cache_file() {
    const std::string& path = config_.cache_file;
    if (path.empty()) return;
    extend_stop_timeout(kSaveFloorMs + cache_->counters().entries * kSavePerEntryUs / 1000);
    const Result<uint64_t> dumped = cache::dump_cache(*cache_, path, monotonic_ms(), wall_ms());
    if (dumped) {
        log_info("saved %llu entries to %s", static_cast<unsigned long long>(*dumped),
                 path.c_str());
    } else {
        log_error("cache not saved: %s", dumped.error().c_str());
    }
}

}  // namespace nscache::daemon
