#include "cli/supervisor.h"

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "cli/resource_limits.h"
#include "common/log.h"
#include "dns/wire.h"

namespace nscache {
namespace {

constexpr auto kReloadReplyTimeout = std::chrono::seconds(30);

bool same_addresses(const std::vector<SocketAddress>& a, const std::vector<SocketAddress>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
        if (!(a[i] == b[i])) return false;
    }
    return true;
}

std::string list(const std::vector<SocketAddress>& addresses) {
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
    if (!same_addresses(running.listen, next.listen)) changed.push_back("listen");
    next.listen = running.listen;
    next.listen_is_default = running.listen_is_default;
    keep("threads", &Config::threads);
    keep("user", &Config::user);
    keep("control", &Config::control);
    keep("control-group", &Config::control_group);
    keep("nss", &Config::nss);
    keep("nss-socket", &Config::nss_socket);
    keep("edns-buffer-size", &Config::edns_buffer_size);
    keep("cache-file", &Config::cache_file);
    keep("stale-ttl", &Config::stale_ttl_s);
    keep("serve-stale", &Config::serve_stale);
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

Supervisor::Supervisor(const ConfigSource& source, server::SettingsPtr settings,
                       std::unique_ptr<upstream::UpstreamRegistry> registry)
    : source_(source),
      registry_(std::move(registry)),
      files_(loop_, [this] { upstream_files_changed(); }) {
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
    files_.watch({c.upstreams_from_resolv_conf ? c.resolv_conf_path : std::string()});
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
        log_error("reload (%s) refused, keeping the running configuration: %s", why,
                  error->message.c_str());
        return "error: " + error->message + "\n";
    }
    const server::SettingsPtr running = current();
    for (const std::string& name : keep_fixed_options(running->config, next)) {
        log_warning("reload: %s changed; it takes effect at the next restart", name.c_str());
    }
    publish(next, why);
    watch_files();
    const server::SettingsPtr now = current();
    log_info("reloaded (%s): %zu upstreams, %zu forward rules, cache %zu bytes", why,
             now->routing->upstream_count(), now->routing->rules().size() - 1,
             now->config.cache_size);
    return "ok\nreloaded: " + std::to_string(now->routing->upstream_count()) + " upstreams, " +
           std::to_string(now->routing->rules().size() - 1) + " forward rules\n";
}

void Supervisor::upstream_files_changed() {
    const server::SettingsPtr running = current();
    const Config& c = running->config;
    if (!c.upstreams_from_resolv_conf) return;
    std::string error;
    auto found = read_resolv_nameservers(c.resolv_conf_path, c.listen, error);
    if (!found) {
        log_warning("%s changed but gives no upstream (%s): keeping %s", c.resolv_conf_path.c_str(),
                    error.c_str(), list(c.upstreams).c_str());
        return;
    }
    if (same_addresses(*found, c.upstreams)) return;
    log_info("upstreams from %s changed: %s -> %s", c.resolv_conf_path.c_str(),
             list(c.upstreams).c_str(), list(*found).c_str());
    Config next = c;
    next.upstreams = std::move(*found);
    publish(next, "resolv.conf changed");
}

void Supervisor::publish(const Config& config, const char* why) {
    const server::SettingsPtr running = current();
    const auto routing = upstream::Routing::build(config, *registry_);
    const uint32_t queries = fit_upstream_queries(raise_descriptor_limit(), config, config.threads);
    server::SettingsPtr next = server::make_settings(config, routing, queries, running.get());
    {
        MutexLock lock(mu_);
        settings_ = next;
    }
    set_log_threshold(log_level_of(config.log_level));
    if (parts_.cache != nullptr && config.cache_size != running->config.cache_size) {
        parts_.cache->set_budget(config.cache_size);
    }
    if (parts_.resolver != nullptr) parts_.resolver->failures.set_policy(next->resolver.failures);
    // Names that became local may still be cached from when they were forwarded.
    if (parts_.cache != nullptr) {
        for (const std::string& name : routing->local_names()) {
            parts_.cache->flush_name(
                dns::Bytes(reinterpret_cast<const uint8_t*>(name.data()), name.size()));
        }
    }
    const bool upstreams_changed = !same_addresses(config.upstreams, running->config.upstreams);
    if (upstreams_changed && config.flush_on_upstream_change && parts_.cache != nullptr) {
        log_info("flush-on-upstream-change: flushed %zu entries (%s)", parts_.cache->flush(), why);
    }
    for (server::Worker* w : parts_.workers) w->post_settings(next);
    if (parts_.nss != nullptr) parts_.nss->post_settings(next);
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
}

}  // namespace nscache
