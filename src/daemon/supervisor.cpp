// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/supervisor.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>

#include "common/log.h"
#include "config/config_log.h"
#include "dns/wire.h"

namespace nscache::daemon {
namespace {

constexpr auto kReloadReplyTimeout = std::chrono::seconds(30);
constexpr const char* kShuttingDown = "error: the daemon is shutting down\n";

template <typename Address>
std::string list(const std::vector<Address>& addresses) {
    std::string text;
    for (const auto& a : addresses) text += (text.empty() ? "" : " ") + a.to_string();
    return text;
}

// Options a running daemon cannot take over (sockets bound, threads started, privileges
// dropped): a reload keeps the running values and names each one that differs.
std::vector<std::string> keep_fixed_options(const Config& running, Config& next) {
    std::vector<std::string> changed;
    auto keep = [&](const char* name, auto field) {
        if (!(running.*field == next.*field)) changed.push_back(name);
        next.*field = running.*field;
    };
    if (running.listen != next.listen) changed.push_back("listen");
    next.listen = running.listen;
    next.listen_is_default = running.listen_is_default;
    keep("listen-tls", &Config::listen_tls);
    keep("listen-https", &Config::listen_https);
    keep("threads", &Config::threads);
    keep("user", &Config::user);
    keep("control", &Config::control);
    keep("control-group", &Config::control_group);
    keep("nss", &Config::nss);
    keep("nss-socket", &Config::nss_socket);
    keep("nscd-socket", &Config::nscd_socket);
    keep("nscd-other-databases", &Config::nscd_proxy_other_databases);
    keep("nscd-other-databases", &Config::nscd_other_databases_set);
    keep("nscd-map-size", &Config::nscd_map_size);
    keep("nscd-passwd", &Config::nscd_passwd);
    keep("nscd-group", &Config::nscd_group);
    keep("nscd-services", &Config::nscd_services);
    keep("nscd-netgroup", &Config::nscd_netgroup);
    keep("nscd-positive-ttl", &Config::nscd_positive_ttl);
    keep("nscd-negative-ttl", &Config::nscd_negative_ttl);
    keep("max-connections-per-user", &Config::max_connections_per_user);
    keep("edns-buffer-size", &Config::edns_buffer_size);
    keep("cache-file", &Config::cache_file);
    keep("state-dir", &Config::state_dir);  // handed to the daemon's user at start
    keep("stale-ttl", &Config::stale_ttl_s);
    keep("serve-stale", &Config::serve_stale);
    // Each worker's socket pool and stream options, and the TLS context, are made at start.
    keep("upstream-sockets", &Config::upstream_sockets);
    keep("upstream-socket-uses", &Config::upstream_socket_uses);
    keep("upstream-idle-timeout", &Config::upstream_idle_timeout_ms);
    keep("tls-ca-file", &Config::tls_ca_file);
    // Open TLS connections were authenticated (or not) under the old mode: a switch to
    // strict must not leave unauthenticated ones in use.
    keep("tls-auth", &Config::tls_auth);
    // Each thread's Redis connections and the nodes' health are built at start.
    keep("shared-cache", &Config::shared_cache);
    return changed;
}

}  // namespace

Supervisor::Supervisor(const ConfigSource& source, Snapshot start,
                       std::unique_ptr<upstream::UpstreamRegistry> registry, const Clock& clock)
    : source_(source),
      registry_(std::move(registry)),
      hosts_(std::move(start.hosts)),
      loop_(clock),
      files_(loop_, [this] { watched_files_changed(); }) {
    {
        MutexLock lock(mu_);
        settings_ = std::move(start.settings);
    }
    sigset_t signals;
    sigemptyset(&signals);
    for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&signals, s);
    signal_fd_ = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
    if (signal_fd_ < 0 || !loop_.add(signal_fd_, EPOLLIN, this, signal_registration_)) {
        std::abort();  // out of descriptors at start-up
    }
    watch_files();
}

Supervisor::~Supervisor() {
    loop_.remove(signal_registration_);
    if (signal_fd_ >= 0) close(signal_fd_);
}

std::vector<control::UpstreamGroupSource> Supervisor::upstream_groups() const {
    const auto routing = current()->routing;
    std::vector<control::UpstreamGroupSource> groups;
    for (const upstream::ForwardRule& rule : routing->rules()) {
        // The set lives as long as the routing: share its ownership.
        groups.push_back({rule.name, std::shared_ptr<const upstream::UpstreamSet>(
                                         routing, rule.upstreams.get())});
    }
    return groups;
}

server::SettingsPtr Supervisor::current() const {
    MutexLock lock(mu_);
    return settings_;
}

void Supervisor::watch_files() {
    const Config& c = current()->config;
    files_.watch({c.upstreams_from_resolv_conf ? c.resolv_conf_path : std::string(), c.hosts_file});
}

void Supervisor::request_stop() {
    stop_requested_.store(true, std::memory_order_release);
    loop_.wake();
}

bool Supervisor::run_once(int max_wait_ms) {
    loop_.run_once(max_wait_ms, [this] {
        if (stop_requested_.load(std::memory_order_acquire) && stop_signal_ == 0) {
            stop_signal_ = SIGTERM;
            stopped_by_request_ = true;
        }
        requests_.drain([this](std::promise<std::string>& reply) {
            reply.set_value(reload("nscache reload"));
        });
    });
    return stop_signal_ != 0;
}

int Supervisor::run() {
    while (!run_once(1000)) {
    }
    // No reload after this: a request that raced the stop is answered now, not left waiting
    // (the control thread, which waits, must stop promptly too); later ones are refused.
    requests_.close();
    requests_.drain([](std::promise<std::string>& reply) { reply.set_value(kShuttingDown); });
    return stop_signal_;
}

Supervisor::WaitEnd Supervisor::wait_until(const std::function<bool()>& done,
                                           uint64_t deadline_ms) {
    // The first signal ended run(); any other (even one read in the same batch) ends this.
    while (!done()) {
        if (stop_signals_ > 1) return WaitEnd::SecondSignal;
        const uint64_t now = monotonic_ms();
        if (now >= deadline_ms) return WaitEnd::Deadline;
        loop_.run_once(static_cast<int>(std::min<uint64_t>(deadline_ms - now, 1000)));
    }
    return WaitEnd::Done;
}

void Supervisor::on_event(uint32_t) {
    signalfd_siginfo info{};
    while (read(signal_fd_, &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGHUP) {
            reload("SIGHUP");
        } else {
            stop_signal_ = static_cast<int>(info.ssi_signo);
            ++stop_signals_;
        }
    }
}

std::string Supervisor::request_reload() {
    std::promise<std::string> request;
    std::future<std::string> reply = request.get_future();
    if (!requests_.post(std::move(request))) return kShuttingDown;
    if (reply.wait_for(kReloadReplyTimeout) != std::future_status::ready) {
        return "error: the reload did not finish in time\n";
    }
    return reply.get();
}

std::string Supervisor::reload(const char* why) {
    Config next;
    if (auto error = source_.load(next)) {
        log_config_refused(*error, ConfigEvent::Reload);
        return "error: " + error->message + "\n";
    }
    const server::SettingsPtr running = current();
    const std::vector<std::string> need_restart = keep_fixed_options(running->config, next);
    const std::vector<std::string> applied = changed_options(running->config, next);
    // The certificate files are read on every reload, changed paths or not (a renewal
    // replaces the files in place); one that cannot be used refuses the whole reload.
    server::TlsContexts tls;
    std::string tls_error;
    std::vector<std::string> tls_warnings;
    if (!server::load_tls_contexts(next, tls, tls_error, tls_warnings)) {
        const ConfigError error{tls_error};
        log_config_refused(error, ConfigEvent::Reload);
        return "error: " + tls_error + "\n";
    }
    for (const std::string& w : tls_warnings) log_warning("%s", w.c_str());
    publish(next, read_hosts(next), why, &tls);
    watch_files();
    log_config_reloaded(source_.path.empty() ? "(flags)" : source_.path, applied, need_restart);
    const server::SettingsPtr now = current();
    return "ok\nreloaded: " + std::to_string(now->routing->upstream_count()) + " upstreams, " +
           std::to_string(now->routing->rules().size() - 1) + " forward rules\n";
}

void Supervisor::watched_files_changed() {
    const server::SettingsPtr running = current();
    const Config& c = running->config;
    Config next = c;
    const char* why = nullptr;
    std::vector<upstream::HostsEntry> hosts = hosts_;
    if (c.upstreams_from_resolv_conf) {
        std::string error;
        auto found = read_resolv_nameservers(c.resolv_conf_path, c.listen, error);
        if (!found) {
            log_warning("%s changed but gives no upstream (%s): keeping %s",
                        c.resolv_conf_path.c_str(), error.c_str(), list(c.upstreams).c_str());
        } else if (const std::vector<UpstreamAddress> upstreams(found->begin(), found->end());
                   upstreams != c.upstreams) {
            log_info("upstreams from %s changed: %s -> %s", c.resolv_conf_path.c_str(),
                     list(c.upstreams).c_str(), list(upstreams).c_str());
            next.upstreams = upstreams;
            why = "resolv.conf changed";
        }
    }
    if (!c.hosts_file.empty()) {
        if (std::vector<upstream::HostsEntry> read = read_hosts(c); read != hosts_) {
            log_info("%s changed: %zu names and addresses answered over DNS", c.hosts_file.c_str(),
                     read.size());
            hosts = std::move(read);
            why = why != nullptr ? "resolv.conf and hosts file changed" : "hosts file changed";
        }
    }
    if (why != nullptr) publish(next, std::move(hosts), why);
}

void Supervisor::publish(const Config& config, std::vector<upstream::HostsEntry> hosts,
                         const char* why, const server::TlsContexts* tls) {
    const server::SettingsPtr running = current();
    Snapshot snapshot =
        build_snapshot(config, std::move(hosts), *registry_,
                       upstream_queries_within_limits(config, /*warn=*/false), running.get(), tls);
    hosts_ = std::move(snapshot.hosts);
    const server::SettingsPtr next = snapshot.settings;
    const auto& routing = next->routing;
    {
        MutexLock lock(mu_);
        settings_ = next;
    }
    // Every thread first: what is flushed below cannot come back from the old routes (a
    // query in flight under them, or started by a thread that has not switched yet, relays
    // its answer but does not cache it: only answers under routing_in_force are kept).
    if (parts_.resolver != nullptr) {
        parts_.resolver->routing_in_force.store(routing.get(), std::memory_order_release);
    }
    for (server::Worker* w : parts_.workers) w->post_settings(next);
    if (parts_.nss != nullptr) parts_.nss->post_settings(next);
    if (parts_.nscd != nullptr) parts_.nscd->post_settings(next);
    if (parts_.control != nullptr) parts_.control->post_live_options(std::move(snapshot.control));
    set_log_threshold(log_level_of(config.log_level));
    warn_about_settings(*next);
    if (parts_.resolver != nullptr) {
        parts_.resolver->failures.set_policy(next->resolver.failures);
        // Failures seen through the old upstreams or routes say nothing of the new ones.
        parts_.resolver->failures.clear_all();
    }
    if (parts_.cache == nullptr) return;
    cache::Cache& cache = *parts_.cache;
    if (config.cache_size != running->config.cache_size && !cache.set_budget(config.cache_size)) {
        log_warning(
            "cache-size %zu: the cache's tables were sized for %zu at start; a restart "
            "sizes them for the new budget",
            config.cache_size, running->config.cache_size);
    }
    size_t flushed = 0;
    const bool upstreams_changed = config.upstreams != running->config.upstreams;
    if (upstreams_changed && config.flush_on_upstream_change) {
        flushed = cache.flush();
        log_info("flush-on-upstream-change: flushed %zu entries (%s)", flushed, why);
    } else {
        // Answers cached under a domain whose route moved came from elsewhere.
        for (const std::string& domain : routing->moved_domains(*running->routing)) {
            flushed += cache.flush_suffix(
                dns::Bytes(reinterpret_cast<const uint8_t*>(domain.data()), domain.size()));
        }
        flush_local_answers(cache, *routing);
    }
    // The NSS map republishes from the cache: nothing it holds may outlive a moved route.
    if (parts_.nss != nullptr) parts_.nss->invalidate_map();
    if (parts_.nscd != nullptr) parts_.nscd->invalidate_map();
    if (flushed > 0) log_info("%s: flushed %zu entries of moved routes", why, flushed);
}

}  // namespace nscache::daemon
