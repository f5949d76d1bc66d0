// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_client.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nscache::control {

std::optional<ControlReply> control_request(const std::string& socket_path,
                                            const std::string& request, std::string& error) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (socket_path.size() >= sizeof addr.sun_path) {
        error = "control socket path too long: " + socket_path;
        return std::nullopt;
    }
    std::memcpy(addr.sun_path, socket_path.c_str(), socket_path.size() + 1);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    // Dump and load of a large cache take a while: allow a minute.
    timeval tv{60, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        error = "cannot reach the daemon at " + socket_path + ": " + std::strerror(errno);
        close(fd);
        return std::nullopt;
    }
    const std::string line = request + "\n";
    if (send(fd, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
        error = "cannot send to " + socket_path + ": " + std::strerror(errno);
        close(fd);
        return std::nullopt;
    }
    std::string text;
    char buf[4096];
    for (;;) {
        const ssize_t n = recv(fd, buf, sizeof buf, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        text.append(buf, static_cast<size_t>(n));
    }
    close(fd);
    ControlReply reply;
    const size_t nl = text.find('\n');
    const std::string status = text.substr(0, nl);
    reply.ok = status == "ok";
    reply.body = reply.ok ? (nl == std::string::npos ? "" : text.substr(nl + 1))
                          : (status.rfind("error: ", 0) == 0 ? status.substr(7) : status);
    if (status.empty()) {
        error = "no answer from the daemon at " + socket_path;
        return std::nullopt;
    }
    return reply;
}

}  // namespace nscache::control
