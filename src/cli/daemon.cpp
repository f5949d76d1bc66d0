#include "cli/daemon.h"

#include <signal.h>
#include <unistd.h>

#include <memory>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cli/privileges.h"
#include "common/clock.h"
#include "common/counters.h"
#include "common/files.h"
#include "common/log.h"
#include "control/cache_file.h"
#include "control/control_server.h"
#include "server/listen_sockets.h"
#include "server/nss_server.h"
#include "server/server_shared.h"
#include "server/worker.h"
#include "upstream/resolver.h"
#include "upstream/upstream_set.h"

namespace nscache {
namespace {

sigset_t shutdown_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    return set;
}

cache::CacheConfig cache_config(const Config& c) {
    return cache::CacheConfig{.budget_bytes = c.cache_size,
                              .stale_ttl_s = c.serve_stale ? c.stale_ttl_s : 0};
}

upstream::ResolverOptions resolver_options(const Config& c) {
    upstream::ResolverOptions o;
    o.query_timeout_ms = c.query_timeout_ms;
    o.edns_buffer_size = c.edns_buffer_size;
    o.ttl = cache::TtlPolicy{c.min_ttl, c.max_ttl, c.negative_max_ttl, c.servfail_ttl};
    return o;
}

}  // namespace

int run_daemon(const Config& config) {
    // Signals are taken by sigwait below; every thread started from here inherits the mask.
    const sigset_t signals = shutdown_signals();
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    signal(SIGPIPE, SIG_IGN);

    const uint64_t started_ms = monotonic_ms();
    cache::Cache cache(cache_config(config));
    upstream::UpstreamSet upstreams(config.upstreams);
    upstream::ResolverShared resolver_shared{resolver_options(config), cache, upstreams, {}, {}};
    server::ServerShared shared{config,  cache, resolver_shared, server::AccessList(config.allow),
                                nullptr, {}};
    if (config.rate_limit > 0) {
        shared.rate_limiter =
            std::make_unique<server::RateLimiter>(config.rate_limit, config.rate_limit_burst);
    }

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

    // One counter block per worker, and one for the NSS thread (it forwards like a worker).
    std::unique_ptr<WorkerCounters[]> counters(new WorkerCounters[workers + 1]);
    std::unique_ptr<server::NssServer> nss;
    if (config.nss) {
        nss = std::make_unique<server::NssServer>(
            shared, counters[workers], workers,
            server::NssOptions{config.nss_socket, config.nss_map});
        std::string error;
        if (!make_parent_folder(config.nss_socket) || !make_parent_folder(config.nss_map)) {
            error = "cannot create the folder of " + config.nss_socket;
        } else if (auto e = nss->open()) {
            error = *e;
        }
        if (!error.empty()) {
            log_error("%s", error.c_str());
            sockets.close_all();
            return 1;
        }
    }
    control::ControlOptions control_options{.socket_path = config.control,
                                            .group = config.control_group,
                                            .metrics_listen = std::nullopt,
                                            .metrics_allow = config.metrics_allow,
                                            .state_dir = config.state_dir,
                                            .ttl_policy = resolver_shared.options.ttl,
                                            .after_flush = nullptr};
    if (nss) control_options.after_flush = [&nss] { nss->invalidate_map(); };
    if (!config.metrics_listen.empty()) {
        control_options.metrics_listen = parse_socket_address(config.metrics_listen, std::nullopt);
    }
    control::ControlServer control_server(
        control_options, cache,
        control::StatsSources{std::span<const WorkerCounters>(counters.get(), workers + 1), &cache,
                              &upstreams, started_ms});
    if (auto error = control_server.open(user ? user->uid : geteuid())) {
        log_error("%s", error->c_str());
        sockets.close_all();
        return 1;
    }

    if (!config.cache_file.empty() && access(config.cache_file.c_str(), F_OK) == 0) {
        const auto loaded = control::load_cache(
            cache, config.cache_file, resolver_shared.options.ttl, monotonic_ms(), wall_ms());
        if (loaded.ok) {
            log_info("loaded %llu entries from %s", static_cast<unsigned long long>(loaded.entries),
                     config.cache_file.c_str());
        } else {
            log_warning("cache file skipped, starting empty: %s", loaded.error.c_str());
        }
    }

    if (user) {
        // The runtime folders become the user's, so it can replace and remove its files.
        for (const std::string& path : {config.control, config.nss_socket, config.nss_map}) {
            const std::string folder = parent_folder(path);
            if (folder == "/run/nscache" && chown(folder.c_str(), user->uid, user->gid) != 0) {
                log_warning("cannot give %s to %s", folder.c_str(), config.user.c_str());
            }
        }
        if (auto error = drop_privileges(config.user, *user)) {
            log_error("%s", error->c_str());
            sockets.close_all();
            return 1;
        }
        log_info("running as user %s", config.user.c_str());
    }

    std::vector<std::unique_ptr<server::Worker>> worker_list;
    for (unsigned i = 0; i < workers; ++i) {
        worker_list.push_back(std::make_unique<server::Worker>(i, shared, counters[i],
                                                               sockets.udp[i], sockets.tcp[i]));
        resolver_shared.queues.push_back(&worker_list.back()->completion_queue());
    }
    if (nss) resolver_shared.queues.push_back(&nss->completion_queue());
    std::vector<std::thread> threads;
    for (auto& w : worker_list) threads.emplace_back([&w] { w->run(); });
    control_server.start();
    if (nss) nss->start();
    log_info("%u workers, cache %zu bytes, %zu upstreams", workers, config.cache_size,
             upstreams.size());
    log_info("ready");

    int signal_number = 0;
    sigwait(&signals, &signal_number);
    log_info("shutting down (%s)", signal_number == SIGINT ? "SIGINT" : "SIGTERM");

    control_server.stop();
    if (nss) nss->stop();
    for (auto& w : worker_list) w->request_stop();
    for (auto& t : threads) t.join();
    nss.reset();
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
