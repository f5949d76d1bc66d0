// SPDX-License-Identifier: BSD-3-Clause
#include "cli/supervisor.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "cli/resource_limits.h"
#include "common/log.h"
#include "config/config_log.h"
#include "dns/name.h"
#include "dns/wire.h"
#include "hostdb/hosts_file.h"

namespace nscache {
namespace {

constexpr auto kReloadReplyTimeout = std::chrono::seconds(30);

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
    keep("threads", &Config::threads);
    keep("user", &Config::user);
    keep("control", &Config::control);
    keep("control-group", &Config::control_group);
    keep("nss", &Config::nss);
    keep("nss-socket", &Config::nss_socket);
    keep("nscd-socket", &Config::nscd_socket);
    keep("nscd-other-databases", &Config::nscd_proxy_other_databases);
    keep("nscd-map-size", &Config::nscd_map_size);
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

LogLevel log_level_of(LogThreshold t) {
    switch (t) {
        case LogThreshold::Error:
            return LogLevel::Error;
        case LogThreshold::Warning:
            return LogLevel::Warning;
        case LogThreshold::Info:
            return LogLevel::Info;
        case LogThreshold::Debug:
            return LogLevel::Debug;
    }
    return LogLevel::Info;
}

void warn_about_settings(const server::Settings& settings) {
    const Config& config = settings.config;
    // The cache's budget plus what the daemon needs besides it (measured: ~12 MiB, and
    // buffers per worker); a cgroup bound below that ends in an OOM kill under load.
    const uint64_t needed = config.cache_size + (uint64_t{32} << 20) + config.threads * (4u << 20);
    if (auto max = cgroup_memory_max(); max && *max < needed) {
        log_warning(
            "cache-size %zu needs about %llu bytes, more than this cgroup's memory.max "
            "%llu: lower cache-size or raise MemoryMax",
            config.cache_size, static_cast<unsigned long long>(needed),
            static_cast<unsigned long long>(*max));
    }
    if (!settings.rate_limiter && settings.access.reaches_beyond_loopback()) {
        log_warning(
            "allow reaches beyond loopback and rate-limit is not set: replies to other "
            "hosts are unlimited (a reflection risk); set rate-limit");
    }
}

void flush_local_answers(cache::Cache& cache, const upstream::Routing& routing) {
    auto bytes = [](const std::string& wire) {
        return dns::Bytes(reinterpret_cast<const uint8_t*>(wire.data()), wire.size());
    };
    for (const std::string& name : routing.local_names()) cache.flush_name(bytes(name));
    for (const std::string& zone : routing.local_zones()) cache.flush_suffix(bytes(zone));
    for (const char* chaos : {"version.bind.", "version.server.", "id.server.", "hostname.bind."}) {
        dns::NameBuffer name = *dns::name_from_text(chaos);
        cache.flush_name(name.view());
    }
}

Supervisor::Supervisor(const ConfigSource& source, server::SettingsPtr settings,
                       std::unique_ptr<upstream::UpstreamRegistry> registry,
                       std::vector<upstream::HostsEntry> hosts)
    : source_(source),
      registry_(std::move(registry)),
      hosts_(std::move(hosts)),
      files_(loop_, [this] { watched_files_changed(); }) {
    {
        MutexLock lock(mu_);
        settings_ = std::move(settings);
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

int Supervisor::run() {
    while (stop_signal_ == 0) {
        loop_.run_once(1000, [this] {
            std::vector<std::shared_ptr<Request>> pending;
            {
                MutexLock lock(requests_mu_);
                pending.swap(requests_);
            }
            for (auto& r : pending) r->reply.set_value(reload("nscache reload"));
        });
    }
    // No reload after this: a request that raced the stop is answered now, not left waiting
    // (the control thread, which waits, must stop promptly too).
    std::vector<std::shared_ptr<Request>> pending;
    {
        MutexLock lock(requests_mu_);
        stopping_ = true;
        pending.swap(requests_);
    }
    for (auto& r : pending) r->reply.set_value("error: the daemon is shutting down\n");
    return stop_signal_;
}

void Supervisor::on_event(uint32_t) {
    signalfd_siginfo info{};
    while (read(signal_fd_, &info, sizeof info) == sizeof info) {
        if (info.ssi_signo == SIGHUP) {
            reload("SIGHUP");
        } else {
            stop_signal_ = static_cast<int>(info.ssi_signo);
        }
    }
}

std::string Supervisor::request_reload() {
    auto request = std::make_shared<Request>();
    std::future<std::string> reply = request->reply.get_future();
    {
        MutexLock lock(requests_mu_);
        if (stopping_) return "error: the daemon is shutting down\n";
        requests_.push_back(request);
    }
    loop_.wake();
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
    hosts_ = next.hosts_file.empty() ? std::vector<upstream::HostsEntry>{}
                                     : hostdb::read_hosts_entries(next.hosts_file);
    publish(next, why);
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
        std::vector<upstream::HostsEntry> hosts = hostdb::read_hosts_entries(c.hosts_file);
        if (hosts != hosts_) {
            log_info("%s changed: %zu names and addresses answered over DNS", c.hosts_file.c_str(),
                     hosts.size());
            hosts_ = std::move(hosts);
            why = why != nullptr ? "resolv.conf and hosts file changed" : "hosts file changed";
        }
    }
    if (why != nullptr) publish(next, why);
}

void Supervisor::publish(const Config& config, const char* why) {
    const server::SettingsPtr running = current();
    const auto routing = upstream::Routing::build(config, *registry_, hosts_);
    const uint32_t queries = fit_upstream_queries(raise_descriptor_limit(), config, config.threads);
    server::SettingsPtr next = server::make_settings(config, routing, queries, running.get());
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
    if (parts_.control != nullptr) {
        control::ControlLiveOptions live;
        if (!config.metrics_listen.empty()) {
            live.metrics_listen = parse_socket_address(config.metrics_listen, std::nullopt);
        }
        live.metrics_allow = config.metrics_allow;
        live.state_dir = config.state_dir;
        live.ttl_policy = next->resolver.ttl;
        parts_.control->post_live_options(std::move(live));
    }
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

}  // namespace nscache
