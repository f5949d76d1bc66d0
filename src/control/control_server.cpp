// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_server.h"

#include <fcntl.h>

#include <grp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/cache_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "control/control_sockets.h"
#include "control/http.h"
#include "control/state_dir.h"
#include "dns/name.h"

namespace nscache::control {
namespace {

size_t index_of(ConnectionKind kind) {
    return static_cast<size_t>(kind);
}

const char* name_of(ConnectionKind kind) {
    return kind == ConnectionKind::Metrics ? "metrics" : "health";
}

// A short line to a client that is turned away at accept: the socket is new and empty, so
// a non-blocking send of a few bytes either goes out whole or not at all.
void send_and_close(int fd, const char* text) {
    ssize_t ignored = send(fd, text, std::strlen(text), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
    close(fd);
}

bool metrics_peer_allowed(const std::vector<Cidr>& allow, const sockaddr_storage& peer) {
    const auto* sa = reinterpret_cast<const sockaddr*>(&peer);
    if (allow.empty()) return SocketAddress::from_sockaddr(sa, sizeof peer).is_loopback();
    for (const Cidr& c : allow) {
        if (c.contains(sa)) return true;
    }
    return false;
}

}  // namespace

ControlServer::ControlServer(const ControlOptions& options, cache::Cache& cache, StatsSources stats)
    : options_(options), cache_(cache), stats_(stats) {}

ControlServer::~ControlServer() {
    stop();
    connections_.clear();
    control_listener_.reset();
    close_endpoint(ConnectionKind::Metrics);
    close_endpoint(ConnectionKind::Health);
    if (control_fd_ >= 0) {
        close(control_fd_);
        if (owns_path_.load(std::memory_order_relaxed)) unlink(options_.socket_path.c_str());
    }
}

ControlServer::HttpEndpoint& ControlServer::endpoint(ConnectionKind kind) {
    return kind == ConnectionKind::Metrics ? metrics_ : health_;
}

bool ControlServer::health_on_metrics() const {
    return options_.health_listen && options_.metrics_listen &&
           *options_.health_listen == *options_.metrics_listen;
}

std::optional<SocketAddress> ControlServer::wanted_address(ConnectionKind kind) const {
    if (kind == ConnectionKind::Metrics) return options_.metrics_listen;
    return health_on_metrics() ? std::nullopt : options_.health_listen;
}

// On the start-up thread before start(), on the control thread after it. A socket handed over
// by a takeover (`handed` >= 0, already listening on `address`) is served as it is.
Result<void> ControlServer::bind_endpoint(ConnectionKind kind, const SocketAddress& address,
                                          int handed) {
    HttpEndpoint& e = endpoint(kind);
    if (handed >= 0) {
        e.fd = handed;
        fcntl(e.fd, F_SETFL, fcntl(e.fd, F_GETFL) | O_NONBLOCK);
    } else {
        std::string error;
        e.fd = bind_http_socket(address, name_of(kind), error);
        if (e.fd < 0) return Error{error};
    }
    e.address = address;
    e.listener = std::make_unique<Listener>(
        loop_, e.fd, name_of(kind), [this, kind](int fd, const sockaddr_storage& peer, socklen_t) {
            accept_http(kind, fd, peer);
        });
    if (kind == ConnectionKind::Metrics) {
        log_info("metrics on http://%s/metrics", address.to_string().c_str());
    }
    if (kind == ConnectionKind::Health || health_on_metrics()) {
        log_info("health on http://%s/health and /ready", address.to_string().c_str());
    }
    return {};
}

void ControlServer::close_endpoint(ConnectionKind kind) {
    HttpEndpoint& e = endpoint(kind);
    e.listener.reset();
    if (e.fd >= 0) close(e.fd);
    e.fd = -1;
    e.address.reset();
}

Result<void> ControlServer::open(uid_t owner_uid, bool switches_user) {
    access_.owner_uid = owner_uid;
    access_.owner_switched = switches_user;
    if (!options_.group.empty()) {
        const group* g = getgrnam(options_.group.c_str());
        if (g == nullptr) return Error{"control-group '" + options_.group + "' does not exist"};
        access_.group = g->gr_gid;
    }
    std::string error;
    if (options_.inherited_fd >= 0) {
        control_fd_ = options_.inherited_fd;
        owns_path_.store(false, std::memory_order_relaxed);
        fcntl(control_fd_, F_SETFL, fcntl(control_fd_, F_GETFL) | O_NONBLOCK);
    } else {
        control_fd_ = bind_control_socket(options_.socket_path, owner_uid, access_.group, error);
        if (control_fd_ < 0) return Error{error};
    }
    for (ConnectionKind kind : {ConnectionKind::Metrics, ConnectionKind::Health}) {
        if (auto address = wanted_address(kind)) {
            const int handed = kind == ConnectionKind::Metrics ? options_.inherited_metrics_fd
                                                               : options_.inherited_health_fd;
            if (auto bound = bind_endpoint(kind, *address, handed); !bound) return bound;
        }
    }
    control_listener_ = std::make_unique<Listener>(
        loop_, control_fd_, "control socket",
        [this](int fd, const sockaddr_storage&, socklen_t) { accept_control(fd); });
    return {};
}

void ControlServer::start() {
    if (!control_listener_ || thread_.joinable()) return;
    thread_ = std::thread([this] {
        control_listener_->start();
        if (metrics_.listener) metrics_.listener->start();
        if (health_.listener) health_.listener->start();
        loop_.run([this] { adopt_live_options(); });
    });
}

void ControlServer::post_live_options(ControlLiveOptions options) {
    live_pending_.post(std::move(options));
}

void ControlServer::stop_listening() {
    listening_ = false;
    if (control_listener_) control_listener_->stop();
    for (HttpEndpoint* e : {&metrics_, &health_}) {
        if (e->listener) e->listener->stop();
    }
}

void ControlServer::adopt_live_options() {
    ControlLiveOptions next;
    if (!live_pending_.take_latest(next)) return;
    if (!listening_) return;  // the endpoints are the new instance's
    options_.metrics_allow = std::move(next.metrics_allow);
    options_.state_dir = std::move(next.state_dir);
    options_.ttl_policy = next.ttl_policy;
    options_.ttl_caps = std::move(next.ttl_caps);
    options_.metrics_listen = next.metrics_listen;
    options_.health_listen = next.health_listen;
    // Every socket whose address changed is closed before any is bound: the health socket may
    // move onto the address metrics gives up, or the other way round.
    const ConnectionKind kinds[] = {ConnectionKind::Metrics, ConnectionKind::Health};
    bool rebind[2] = {false, false};
    for (size_t i = 0; i < 2; ++i) {
        const auto wanted = wanted_address(kinds[i]);
        const HttpEndpoint& e = endpoint(kinds[i]);
        if (wanted.has_value() == e.address.has_value() && (!wanted || *wanted == *e.address)) {
            continue;
        }
        rebind[i] = true;
        if (e.address)
            log_info("%s endpoint %s closed", name_of(kinds[i]), e.address->to_string().c_str());
        close_endpoint(kinds[i]);
    }
    for (size_t i = 0; i < 2; ++i) {
        const auto wanted = wanted_address(kinds[i]);
        if (!rebind[i] || !wanted) continue;
        // A port below 1024 fails once privileges are dropped, and says so.
        if (auto bound = bind_endpoint(kinds[i], *wanted); !bound) {
            log_error("%s-listen %s: %s", name_of(kinds[i]), wanted->to_string().c_str(),
                      bound.error().c_str());
            continue;
        }
        endpoint(kinds[i]).listener->start();
    }
}

void ControlServer::stop() {
    if (!thread_.joinable()) return;
    loop_.request_stop();
    thread_.join();
    // The loop has stopped: its connections are closed here, whatever state they were in.
    connections_.clear();
    for (size_t& n : clients_) n = 0;
}

int ControlServer::dup_control_fd() const {
    return control_fd_ >= 0 ? fcntl(control_fd_, F_DUPFD_CLOEXEC, 0) : -1;
}

int ControlServer::dup_metrics_fd() const {
    return metrics_.fd >= 0 ? fcntl(metrics_.fd, F_DUPFD_CLOEXEC, 0) : -1;
}

int ControlServer::dup_health_fd() const {
    return health_.fd >= 0 ? fcntl(health_.fd, F_DUPFD_CLOEXEC, 0) : -1;
}

bool ControlServer::wants_socket(ConnectionKind kind, const std::string& request) {
    return kind == ConnectionKind::Control && request == "takeover";
}

void ControlServer::adopt_socket(const std::string&, int fd) {
    if (drained_ || takeover_) {
        send_and_close(fd, drained_ ? "error: this instance is draining\n"
                                    : "error: a takeover is already in progress\n");
        return;
    }
    takeover_ = std::make_unique<TakeoverSession>(loop_, fd, access_, options_.takeover, [this] {
        drained_ = drained_ || takeover_->drained();
        // Destroyed once the current event is done with it.
        loop_.add_timer(loop_.now_ms(), [this] { takeover_.reset(); });
    });
    takeover_->start();
}

void ControlServer::accept_control(int fd) {
    // The socket's mode already keeps others out; the peer's credentials are checked as well.
    if (!peer_may_control(fd, access_)) {
        send_and_close(fd, "error: permission denied\n");
        return;
    }
    if (clients_[index_of(ConnectionKind::Control)] >= options_.max_clients) {
        send_and_close(fd, "error: busy, try again\n");
        return;
    }
    adopt(ConnectionKind::Control, fd);
}

// The metrics socket admits metrics-allow only (loopback by default); the health socket
// anyone, as probes come from the node's address and load balancers from theirs: it tells
// no more than up or down.
void ControlServer::accept_http(ConnectionKind kind, int fd, const sockaddr_storage& peer) {
    if ((kind == ConnectionKind::Metrics && !metrics_peer_allowed(options_.metrics_allow, peer)) ||
        clients_[index_of(kind)] >= options_.max_clients) {
        close(fd);
        return;
    }
    adopt(kind, fd);
}

void ControlServer::adopt(ConnectionKind kind, int fd) {
    uint64_t id;
    auto* slot = connections_.add(id);
    if (slot == nullptr) {
        close(fd);
        return;
    }
    *slot = std::make_unique<ControlConnection>(static_cast<ConnectionOwner&>(*this), loop_, kind,
                                                fd, id);
    const uint32_t deadline_ms =
        kind == ConnectionKind::Control ? options_.client_deadline_ms : options_.http_deadline_ms;
    if (!(*slot)->start(loop_.now_ms() + deadline_ms)) {
        connections_.remove(id);
        return;
    }
    ++clients_[index_of(kind)];
}

void ControlServer::closed(uint64_t id) {
    auto* slot = connections_.find(id);
    if (slot == nullptr) return;
    --clients_[index_of((*slot)->kind())];
    // Destroyed once the current event is done with it.
    loop_.add_timer(loop_.now_ms(), [this, id] { connections_.remove(id); });
}

std::string ControlServer::answer(ConnectionKind kind, const std::string& request) {
    if (kind == ConnectionKind::Control) return execute(request);
    return http_answer(kind, request);
}

std::string ControlServer::http_answer(ConnectionKind kind, const std::string& head) {
    HttpRequest request;
    if (auto error = check_request(head, ControlConnection::kMaxRequest, request)) return *error;
    const bool metrics = kind == ConnectionKind::Metrics && request.path == "/metrics";
    const bool health = (kind == ConnectionKind::Health || health_on_metrics()) &&
                        (request.path == "/health" || request.path == "/ready");
    if (!metrics && !health) return http_reply(404, "", "");
    if (request.method != "GET" && request.method != "HEAD") return method_not_allowed();
    const bool head_only = request.method == "HEAD";
    if (metrics) {
        return http_reply(200, "text/plain; version=0.0.4",
                          format_prometheus(collect_stats(stats_, monotonic_ms())), head_only);
    }
    const HealthReply reply = request.path == "/health"
                                  ? liveness(options_.health, monotonic_ms())
                                  : readiness(options_.health, monotonic_ms());
    return http_reply(reply.status, "text/plain", reply.body, head_only);
}

std::string ControlServer::execute(const std::string& request) {
    const size_t space = request.find(' ');
    const std::string command = request.substr(0, space);
    const std::string argument = space == std::string::npos ? "" : request.substr(space + 1);
    if (command == "stats") {
        const StatsSnapshot s = collect_stats(stats_, monotonic_ms());
        if (argument == "json") return "ok\n" + format_json(s);
        if (argument.empty()) return "ok\n" + format_text(s);
        return "error: unknown stats format '" + argument + "'\n";
    }
    if (command == "flush") {
        size_t removed = 0;
        if (argument.empty()) {
            removed = cache_.flush();
        } else {
            auto name = dns::name_from_text(argument);
            if (!name) return "error: bad name '" + argument + "'\n";
            dns::NameBuffer lower;
            dns::lower_name(name->view(), lower);
            removed = cache_.flush_name(lower.view());
        }
        // After the cache: nothing published from the flushed entries may survive.
        if (options_.after_flush) options_.after_flush();
        log_info("control: flushed %zu entries (%s)", removed,
                 argument.empty() ? "all" : argument.c_str());
        return "ok\nflushed " + std::to_string(removed) + " entries\n";
    }
    if (command == "dump" || command == "load") return file_command(command, argument);
    if (command == "reload") {
        if (!options_.reload) return "error: reload is not available\n";
        return options_.reload();
    }
    return "error: unknown command '" + command + "'\n";
}

std::string ControlServer::file_command(const std::string& command, const std::string& name) {
    if (name.empty()) return "error: " + command + " needs a file name\n";
    std::string error;
    const auto path = resolve_state_path(options_.state_dir, name, error);
    if (!path) return "error: " + error + "\n";
    const Result<uint64_t> r =
        command == "dump"
            ? cache::dump_cache(cache_, *path, monotonic_ms(), wall_ms())
            : cache::load_cache(cache_, *path, options_.ttl_policy, monotonic_ms(), wall_ms(),
                                cache::LoadOptions{.ttl_caps = options_.ttl_caps.get()});
    if (!r) {
        log_warning("control: %s %s failed: %s", command.c_str(), path->c_str(), r.error().c_str());
        return "error: " + r.error() + "\n";
    }
    log_info("control: %s %llu entries %s %s", command == "dump" ? "dumped" : "loaded",
             static_cast<unsigned long long>(*r), command == "dump" ? "to" : "from", path->c_str());
    return "ok\n" + std::string(command == "dump" ? "dumped " : "loaded ") + std::to_string(*r) +
           " entries " + (command == "dump" ? "to " : "from ") + *path + "\n";
}

}  // namespace nscache::control
