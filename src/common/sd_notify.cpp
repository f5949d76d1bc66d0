// SPDX-License-Identifier: BSD-3-Clause
#include "common/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

namespace nscache {

bool sd_notify(const char* state) {
    const char* path = std::getenv("NOTIFY_SOCKET");
    if (path == nullptr || path[0] == '\0') return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const size_t length = std::strlen(path);
    if (length >= sizeof addr.sun_path || (path[0] != '/' && path[0] != '@')) return false;
    std::memcpy(addr.sun_path, path, length);
    if (path[0] == '@') addr.sun_path[0] = '\0';  // an abstract socket
    const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    const auto addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + length);
    const bool sent = sendto(fd, state, std::strlen(state), MSG_NOSIGNAL,
                             reinterpret_cast<const sockaddr*>(&addr), addr_len) >= 0;
    close(fd);
    return sent;
}

}  // namespace nscache
