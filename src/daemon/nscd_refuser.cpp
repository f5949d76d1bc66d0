// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/nscd_refuser.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace nscache::daemon {

void NscdRefuser::start(int listening_fd) {
    if (thread_.joinable()) return;
    fcntl(listening_fd, F_SETFL, fcntl(listening_fd, F_GETFL) | O_NONBLOCK);
    stop_fd_ = eventfd(0, EFD_CLOEXEC);
    if (stop_fd_ < 0) return;  // no refuser: lookups wait glibc's timeout, nothing worse
    thread_ = std::thread([this, listening_fd] { run(listening_fd); });
}

void NscdRefuser::stop() {
    if (!thread_.joinable()) return;
    const uint64_t one = 1;
    ssize_t ignored = write(stop_fd_, &one, sizeof one);
    (void)ignored;
    thread_.join();
    close(stop_fd_);
    stop_fd_ = -1;
}

void NscdRefuser::run(int listening_fd) {
    pollfd fds[2] = {{listening_fd, POLLIN, 0}, {stop_fd_, POLLIN, 0}};
    while (true) {
        if (poll(fds, 2, -1) < 0) continue;  // EINTR
        if (fds[1].revents != 0) return;
        // Non-blocking: another reader may have taken the connection (none does, but a
        // blocking accept here would hold stop() up).
        const int client = accept4(listening_fd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client >= 0) close(client);
    }
}

}  // namespace nscache::daemon
