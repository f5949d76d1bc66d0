// SPDX-License-Identifier: BSD-3-Clause
#include "cli/daemon.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cli/privileges.h"
#include "cli/resource_limits.h"
#include "cli/supervisor.h"
#include "common/clock.h"
#include "common/counters.h"
#include "common/files.h"
#include "common/log.h"
#include "common/runtime_lock.h"
#include "common/sd_notify.h"
#include "control/cache_file.h"
#include "control/control_server.h"
#include "front/host_front.h"
#include "hostdb/hosts_file.h"
#include "nscd/nscd_server.h"
#include "nssd/nss_server.h"
#include "server/listen_sockets.h"
#include "server/server_shared.h"
#include "server/worker.h"
#include "upstream/resolver.h"
#include "upstream/tls_client.h"
#include "upstream/upstream_set.h"

namespace nscache {
namespace {

// Taken by the supervisor's signalfd: blocked in every thread started from here.
sigset_t daemon_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    return set;
}

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

// Upstream queries per worker that fit the descriptor limit (raised to its maximum first).
uint32_t upstream_queries_within_limits(const Config& config) {
    const uint64_t limit = raise_descriptor_limit();
    const uint32_t fits = fit_upstream_queries(limit, config, config.threads);
    if (fits < config.max_upstream_queries) {
        log_warning(
            "descriptor limit %llu: max-upstream-queries lowered from %u to %u per worker "
            "(raise LimitNOFILE or ulimit -n)",
            static_cast<unsigned long long>(limit), config.max_upstream_queries, fits);
    }
    return fits;
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

}  // namespace

int run_daemon(const ConfigSource& source, const Config& config) {
    // Signals are read by the supervisor's signalfd; every thread started here inherits the mask.
    const sigset_t signals = daemon_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    // First of all: a second instance with the same paths must touch nothing of the first.
    RuntimeLock runtime_lock;
    if (auto error = runtime_lock.acquire(runtime_paths(config))) {
        log_error("%s", error->c_str());
        return 1;
    }

    const uint64_t started_ms = monotonic_ms();
    // Debug from the start when asked; a quieter level only after "ready" (below).
    if (config.log_level == LogThreshold::Debug) set_log_threshold(LogLevel::Debug);
    cache::Cache cache(cache_config(config));
    // DNS over TLS: one context for every worker (a reload may add tls:// upstreams).
    std::string tls_error;
    std::unique_ptr<upstream::TlsClient> tls = upstream::TlsClient::create(
        upstream::TlsSettings{.ca_file = config.tls_ca_file, .auth = config.tls_auth}, tls_error);
    if (!tls) {
        log_error("%s", tls_error.c_str());
        return 2;
    }
    auto registry = std::make_unique<upstream::UpstreamRegistry>();
    std::vector<upstream::HostsEntry> hosts;
    if (!config.hosts_file.empty()) hosts = hostdb::read_hosts_entries(config.hosts_file);
    const server::SettingsPtr settings =
        server::make_settings(config, upstream::Routing::build(config, *registry, hosts),
                              upstream_queries_within_limits(config));
    Supervisor supervisor(source, settings, std::move(registry), std::move(hosts));
    upstream::ResolverShared resolver_shared{settings->resolver, cache, {}, {}};
    resolver_shared.tls = tls.get();
    resolver_shared.routing_in_force.store(settings->routing.get(), std::memory_order_release);
    server::ServerShared shared{config, cache, resolver_shared, {}};
    warn_about_settings(*settings);

    const unsigned workers = config.threads;
    server::ListenSockets sockets;
    if (auto error = server::open_listen_sockets(config, workers, sockets)) {
        log_error("%s", error->c_str());
        return 1;
    }

    std::optional<UserIds> user;
    if (!config.user.empty()) {
        std::string error;
        user = find_user(config.user, error);
        if (!user) {
            log_error("%s", error.c_str());
            sockets.close_all();
            return 1;
        }
    }

    // One counter block per worker and one for the host front's thread (NSS and nscd sockets;
    // it forwards like a worker, its resolver queue index after the workers'). The spare last
    // block stays zero: stats sum every block.
    std::unique_ptr<WorkerCounters[]> counters(new WorkerCounters[workers + 2]);
    std::unique_ptr<front::HostFront> host_front;
    if (config.nss || !config.nscd_socket.empty()) {
        host_front = std::make_unique<front::HostFront>(resolver_shared, counters[workers], workers,
                                                        settings);
    }
    // nscd first: the front stops its protocols in the order added (see shutdown below).
    std::unique_ptr<nscd::NscdServer> nscd_front;
    if (!config.nscd_socket.empty()) {
        nscd::NscdOptions o;
        o.socket_path = config.nscd_socket;
        o.proxy_other_databases = config.nscd_proxy_other_databases;
        o.prefetch = config.prefetch;
        o.max_connections_per_user = config.max_connections_per_user;
        o.map.data_size = static_cast<uint32_t>(config.nscd_map_size);
        nscd_front = std::make_unique<nscd::NscdServer>(*host_front, o);
    }
    std::unique_ptr<nssd::NssServer> nss;
    if (config.nss) {
        nssd::NssOptions o;
        o.socket_path = config.nss_socket;
        o.max_connections_per_user = config.max_connections_per_user;
        nss = std::make_unique<nssd::NssServer>(*host_front, o);
    }
    // Each front's socket folder, then the socket (NSS first, as before).
    auto open_front = [&sockets](auto& front, const std::string& path) {
        const Result<void> opened =
            make_parent_folder(path) ? front.open() : Error{"cannot create the folder of " + path};
        if (!opened) {
            log_error("%s", opened.error().c_str());
            sockets.close_all();
        }
        return opened.ok();
    };
    if (nss && !open_front(*nss, config.nss_socket)) return 1;
    if (nscd_front && !open_front(*nscd_front, config.nscd_socket)) return 1;
    control::ControlOptions control_options{
        .socket_path = config.control,
        .group = config.control_group,
        .metrics_listen = std::nullopt,
        .metrics_allow = config.metrics_allow,
        .state_dir = config.state_dir,
        .ttl_policy = settings->resolver.ttl,
        .after_flush = nullptr,
        .reload = [&supervisor] { return supervisor.request_reload(); }};
    // A flush forgets published NSS answers and cached resolution failures too.
    control_options.after_flush = [&nss, &nscd_front, &resolver_shared] {
        if (nss) nss->invalidate_map();
        if (nscd_front) nscd_front->invalidate_map();
        resolver_shared.failures.clear_all();
    };
    if (!config.metrics_listen.empty()) {
        control_options.metrics_listen = parse_socket_address(config.metrics_listen, std::nullopt);
    }
    control::ControlServer control_server(
        control_options, cache,
        control::StatsSources{std::span<const WorkerCounters>(counters.get(), workers + 2), &cache,
                              [&supervisor] { return supervisor.upstream_groups(); }, started_ms,
                              &resolver_shared.tier_health});
    if (auto error = control_server.open(user ? user->uid : geteuid())) {
        log_error("%s", error->c_str());
        sockets.close_all();
        return 1;
    }

    if (!config.cache_file.empty() && access(config.cache_file.c_str(), F_OK) == 0) {
        const auto loaded = control::load_cache(cache, config.cache_file, settings->resolver.ttl,
                                                monotonic_ms(), wall_ms());
        if (loaded.ok) {
            log_info("loaded %llu entries from %s", static_cast<unsigned long long>(loaded.entries),
                     config.cache_file.c_str());
        } else {
            log_warning("cache file skipped, starting empty: %s", loaded.error.c_str());
        }
    } else if (!config.cache_file.empty()) {
        log_info("no cache file %s yet: starting empty", config.cache_file.c_str());
    }
    // A file from another version or config may hold answers for what is local now.
    flush_local_answers(cache, *settings->routing);

    if (user) {
        // The runtime folder stays root's: every socket in it is bound by now, and a folder
        // the daemon's user could write would let that user plant links for the next start
        // (which runs as root) to follow. The state folder is the user's: dumps and the cache
        // file are written there after the switch (and read with O_NOFOLLOW before it).
        give_state_dir(config.state_dir, *user);
        if (auto error = drop_privileges(config.user, *user)) {
            log_error("%s", error->c_str());
            sockets.close_all();
            return 1;
        }
        log_info("running as user %s", config.user.c_str());
    }

    std::vector<std::unique_ptr<server::Worker>> worker_list;
    for (unsigned i = 0; i < workers; ++i) {
        worker_list.push_back(std::make_unique<server::Worker>(
            i, shared, counters[i], sockets.udp[i], sockets.tcp[i], settings));
        resolver_shared.queues.push_back(&worker_list.back()->completion_queue());
    }
    if (host_front) resolver_shared.queues.push_back(&host_front->completion_queue());
    std::vector<std::thread> threads;
    for (auto& w : worker_list) threads.emplace_back([&w] { w->run(); });
    control_server.start();
    // The nscd socket listens only now: the privilege drop's initgroups() must not wait on it.
    if (host_front) host_front->start();
    SupervisedParts parts{{},     nss.get(),       nscd_front.get(), &control_server,
                          &cache, &resolver_shared};
    for (auto& w : worker_list) parts.workers.push_back(w.get());
    supervisor.attach(std::move(parts));
    log_info("%u workers, cache %zu bytes, %zu upstreams", workers, config.cache_size,
             settings->routing->upstream_count());
    if (config.shared_cache.enabled()) {
        const auto& sc = config.shared_cache;
        log_info(
            "shared cache: %s %s, timeout %ums, key prefix '%s'%s",
            sc.redis ? "Redis" : "Redis Cluster",
            sc.redis ? sc.redis->to_string().c_str() : sc.redis_cluster.front().to_string().c_str(),
            sc.timeout_ms, sc.key_prefix.c_str(), sc.write ? "" : ", read-only");
    }
    log_info("ready");
    // After the lines harnesses and operators wait for (listening on..., ready), whatever the
    // level: log-level = "warning" quiets what follows, not the start-up contract.
    set_log_threshold(log_level_of(config.log_level));
    // Sockets bound, cache file loaded, workers running: now systemd may start what waits for
    // name service (nss-lookup.target).
    sd_notify("READY=1");

    const int signal_number = supervisor.run();
    log_info("shutting down (%s)", signal_number == SIGINT ? "SIGINT" : "SIGTERM");
    sd_notify("STOPPING=1");
    // First of all: glibc's clients drop the nscd map at once and use NSS while we stop.
    if (host_front) host_front->stop();

    control_server.stop();
    for (auto& w : worker_list) w->request_stop();
    for (auto& t : threads) t.join();
    nss.reset();
    nscd_front.reset();
    host_front.reset();
    worker_list.clear();

    if (!config.cache_file.empty()) {
        const auto dumped =
            control::dump_cache(cache, config.cache_file, monotonic_ms(), wall_ms());
        if (dumped.ok) {
            log_info("saved %llu entries to %s", static_cast<unsigned long long>(dumped.entries),
                     config.cache_file.c_str());
        } else {
            log_error("cache not saved: %s", dumped.error.c_str());
        }
    }
    return 0;
}

}  // namespace nscache
