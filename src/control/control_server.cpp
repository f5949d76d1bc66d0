#include "control/control_server.h"

#include <grp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/files.h"
#include "common/log.h"
#include "control/cache_file.h"
#include "dns/name.h"

namespace nscache::control {
namespace {

constexpr size_t kMaxRequest = 4096;
constexpr int kClientTimeoutSeconds = 2;

void set_timeouts(int fd) {
    timeval tv{kClientTimeoutSeconds, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

void send_all(int fd, const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = send(fd, text.data() + done, text.size() - done, MSG_NOSIGNAL);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            return;
        }
        done += static_cast<size_t>(n);
    }
}

// Reads until `terminator` or the size limit or the timeout.
std::string read_request(int fd, const char* terminator) {
    std::string request;
    char buf[512];
    while (request.size() < kMaxRequest && request.find(terminator) == std::string::npos) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        request.append(buf, static_cast<size_t>(n));
    }
    return request;
}

}  // namespace

ControlServer::ControlServer(const ControlOptions& options, cache::Cache& cache, StatsSources stats)
    : options_(options), cache_(cache), stats_(stats) {}

ControlServer::~ControlServer() {
    stop();
    if (control_fd_ >= 0) {
        close(control_fd_);
        unlink(options_.socket_path.c_str());
    }
    if (metrics_fd_ >= 0) close(metrics_fd_);
    if (stop_fd_ >= 0) close(stop_fd_);
}

std::optional<std::string> ControlServer::open(uid_t owner_uid) {
    owner_uid_ = owner_uid;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof addr.sun_path) {
        return "control socket path too long: " + options_.socket_path;
    }
    std::memcpy(addr.sun_path, options_.socket_path.c_str(), options_.socket_path.size() + 1);
    if (!make_parent_folder(options_.socket_path)) {
        return "cannot create the folder of " + options_.socket_path + ": " + std::strerror(errno);
    }
    control_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // A socket file left by a daemon that died is removed; one that still answers is not ours.
    if (connect(control_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
        close(control_fd_);
        control_fd_ = -1;
        return "control socket " + options_.socket_path + " is in use by a running daemon";
    }
    close(control_fd_);
    unlink(options_.socket_path.c_str());
    control_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const mode_t old_mask = umask(0177);  // the socket is born 0600: no window for others
    const int bound = bind(control_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    umask(old_mask);
    if (bound != 0 || listen(control_fd_, 16) != 0) {
        const std::string error = std::strerror(errno);
        close(control_fd_);
        control_fd_ = -1;
        return "cannot bind control socket " + options_.socket_path + ": " + error;
    }
    if (!options_.group.empty()) {
        const group* g = getgrnam(options_.group.c_str());
        if (g == nullptr) return "control-group '" + options_.group + "' does not exist";
        group_gid_ = g->gr_gid;
        if (chown(options_.socket_path.c_str(), owner_uid, g->gr_gid) != 0 ||
            chmod(options_.socket_path.c_str(), 0660) != 0) {
            return "cannot set the owner of " + options_.socket_path + ": " + std::strerror(errno);
        }
    } else if (chown(options_.socket_path.c_str(), owner_uid, static_cast<gid_t>(-1)) != 0) {
        return "cannot set the owner of " + options_.socket_path + ": " + std::strerror(errno);
    }

    if (options_.metrics_listen) {
        const SocketAddress& m = *options_.metrics_listen;
        metrics_fd_ = socket(m.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        setsockopt(metrics_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(metrics_fd_, m.sa(), m.length) != 0 || listen(metrics_fd_, 16) != 0) {
            return "cannot bind metrics " + m.to_string() + ": " + std::strerror(errno);
        }
        log_info("metrics on http://%s/metrics", m.to_string().c_str());
    }
    stop_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return std::nullopt;
}

void ControlServer::start() {
    thread_ = std::thread([this] { run(); });
}

void ControlServer::stop() {
    if (!thread_.joinable()) return;
    const uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
}

void ControlServer::run() {
    for (;;) {
        pollfd fds[3] = {{stop_fd_, POLLIN, 0}, {control_fd_, POLLIN, 0}, {metrics_fd_, POLLIN, 0}};
        const nfds_t count = metrics_fd_ >= 0 ? 3 : 2;
        if (poll(fds, count, -1) < 0) {
            if (errno == EINTR) continue;
            return;
        }
        if (fds[0].revents) return;
        if (fds[1].revents & POLLIN) {
            const int fd = accept4(control_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                serve_control_client(fd);
                close(fd);
            }
        }
        if (count == 3 && (fds[2].revents & POLLIN)) {
            const int fd = accept4(metrics_fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                serve_metrics_client(fd);
                close(fd);
            }
        }
    }
}

void ControlServer::serve_control_client(int fd) {
    // The socket's mode already keeps others out; the peer's credentials are checked as well.
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 ||
        !(cred.uid == 0 || cred.uid == owner_uid_ ||
          (!options_.group.empty() && cred.gid == group_gid_))) {
        send_all(fd, "error: permission denied\n");
        return;
    }
    set_timeouts(fd);
    std::string request = read_request(fd, "\n");
    if (const size_t nl = request.find('\n'); nl != std::string::npos) request.resize(nl);
    send_all(fd, execute(request));
}

void ControlServer::serve_metrics_client(int fd) {
    set_timeouts(fd);
    const std::string request = read_request(fd, "\r\n\r\n");
    if (request.rfind("GET /metrics", 0) != 0) {
        send_all(fd, "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
        return;
    }
    const std::string body = format_prometheus(collect_stats(stats_, monotonic_ms()));
    send_all(fd, "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
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
        return "ok\nflushed " + std::to_string(removed) + " entries\n";
    }
    if (command == "dump" || command == "load") {
        if (argument.empty() || argument[0] != '/') {
            return "error: " + command + " needs an absolute file path\n";
        }
        const CacheFileResult r =
            command == "dump"
                ? dump_cache(cache_, argument, monotonic_ms(), wall_ms())
                : load_cache(cache_, argument, cache::TtlPolicy{}, monotonic_ms(), wall_ms());
        if (!r.ok) return "error: " + r.error + "\n";
        return "ok\n" + std::string(command == "dump" ? "dumped " : "loaded ") +
               std::to_string(r.entries) + " entries " + (command == "dump" ? "to " : "from ") +
               argument + "\n";
    }
    return "error: unknown command '" + command + "'\n";
}

}  // namespace nscache::control
