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
#include "control/state_dir.h"
#include "dns/name.h"

namespace nscache::control {
namespace {

size_t index_of(ConnectionKind kind) {
    return kind == ConnectionKind::Control ? 0 : 1;
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
    metrics_listener_.reset();
    if (control_fd_ >= 0) {
        close(control_fd_);
        if (owns_path_.load(std::memory_order_relaxed)) unlink(options_.socket_path.c_str());
    }
    if (metrics_fd_ >= 0) close(metrics_fd_);
}

Result<void> ControlServer::open(uid_t owner_uid) {
    access_.owner_uid = owner_uid;
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
    if (options_.inherited_metrics_fd >= 0) {
        metrics_fd_ = options_.inherited_metrics_fd;
        fcntl(metrics_fd_, F_SETFL, fcntl(metrics_fd_, F_GETFL) | O_NONBLOCK);
        log_info("metrics on http://%s/metrics (taken over)",
                 options_.metrics_listen ? options_.metrics_listen->to_string().c_str() : "?");
    } else if (options_.metrics_listen) {
        metrics_fd_ = bind_metrics_socket(*options_.metrics_listen, error);
        if (metrics_fd_ < 0) return Error{error};
        log_info("metrics on http://%s/metrics", options_.metrics_listen->to_string().c_str());
    }
    control_listener_ = std::make_unique<Listener>(
        loop_, control_fd_, "control socket",
        [this](int fd, const sockaddr_storage&, socklen_t) { accept_control(fd); });
    if (metrics_fd_ >= 0) {
        metrics_listener_ = std::make_unique<Listener>(
            loop_, metrics_fd_, "metrics",
            [this](int fd, const sockaddr_storage& peer, socklen_t) { accept_metrics(fd, peer); });
    }
    return {};
}

void ControlServer::start() {
    if (!control_listener_ || thread_.joinable()) return;
    thread_ = std::thread([this] {
        control_listener_->start();
        if (metrics_listener_) metrics_listener_->start();
        loop_.run([this] { adopt_live_options(); });
    });
}

void ControlServer::post_live_options(ControlLiveOptions options) {
    live_pending_.post(std::move(options));
}

void ControlServer::adopt_live_options() {
    ControlLiveOptions next;
    if (!live_pending_.take_latest(next)) return;
    options_.metrics_allow = std::move(next.metrics_allow);
    options_.state_dir = std::move(next.state_dir);
    options_.ttl_policy = next.ttl_policy;
    const bool same = next.metrics_listen.has_value() == options_.metrics_listen.has_value() &&
                      (!next.metrics_listen || *next.metrics_listen == *options_.metrics_listen);
    if (same) return;
    metrics_listener_.reset();
    if (metrics_fd_ >= 0) close(metrics_fd_);
    metrics_fd_ = -1;
    options_.metrics_listen = next.metrics_listen;
    if (options_.metrics_listen) {
        open_metrics(*options_.metrics_listen);
    } else {
        log_info("metrics endpoint closed");
    }
}

void ControlServer::open_metrics(const SocketAddress& address) {
    std::string error;
    metrics_fd_ = bind_metrics_socket(address, error);
    if (metrics_fd_ < 0) {
        log_error("metrics-listen %s: %s", address.to_string().c_str(), error.c_str());
        return;
    }
    metrics_listener_ = std::make_unique<Listener>(
        loop_, metrics_fd_, "metrics",
        [this](int fd, const sockaddr_storage& peer, socklen_t) { accept_metrics(fd, peer); });
    metrics_listener_->start();
    log_info("metrics on http://%s/metrics", address.to_string().c_str());
}

void ControlServer::stop() {
    if (!thread_.joinable()) return;
    loop_.request_stop();
    thread_.join();
    // The loop has stopped: its connections are closed here, whatever state they were in.
    connections_.clear();
    clients_[0] = clients_[1] = 0;
}

int ControlServer::dup_control_fd() const {
    return control_fd_ >= 0 ? fcntl(control_fd_, F_DUPFD_CLOEXEC, 0) : -1;
}

int ControlServer::dup_metrics_fd() const {
    return metrics_fd_ >= 0 ? fcntl(metrics_fd_, F_DUPFD_CLOEXEC, 0) : -1;
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

void ControlServer::accept_metrics(int fd, const sockaddr_storage& peer) {
    if (!metrics_peer_allowed(options_.metrics_allow, peer) ||
        clients_[index_of(ConnectionKind::Metrics)] >= options_.max_clients) {
        close(fd);
        return;
    }
    adopt(ConnectionKind::Metrics, fd);
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
    if (!(*slot)->start(loop_.now_ms() + options_.client_deadline_ms)) {
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
    if (kind == ConnectionKind::Metrics) return metrics_answer(request);
    return execute(request);
}

std::string ControlServer::metrics_answer(const std::string& head) {
    if (head.rfind("GET /metrics", 0) != 0) {
        return "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
    }
    const std::string body = format_prometheus(collect_stats(stats_, monotonic_ms()));
    return "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
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
            : cache::load_cache(cache_, *path, options_.ttl_policy, monotonic_ms(), wall_ms());
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
