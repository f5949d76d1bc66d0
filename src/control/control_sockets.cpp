// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_sockets.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"

namespace nscache::control {

int bind_control_socket(const std::string& path, uid_t owner_uid, std::optional<gid_t> group,
                        std::string& error) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) {
        error = "control socket path too long: " + path;
        return -1;
    }
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    if (!make_parent_folder(path)) {
        error = "cannot create the folder of " + path + ": " + std::strerror(errno);
        return -1;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        error = std::string("cannot create the control socket: ") + std::strerror(errno);
        return -1;
    }
    // A socket file left by a daemon that died is removed; one that still answers is not ours.
    // (A non-blocking connect to a live listener succeeds at once or says EAGAIN.)
    const int probe = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    if (probe == 0 || errno == EAGAIN) {
        close(fd);
        error = "control socket " + path + " is in use by a running daemon";
        return -1;
    }
    close(fd);
    unlink(path.c_str());  // removes a link itself, never what it points to
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    // The socket is born with its final mode: no window in which others may connect, and no
    // chmod by path afterwards.
    const mode_t old_mask = umask(group ? 0117 : 0177);
    const int bound = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    umask(old_mask);
    if (bound != 0 || listen(fd, 16) != 0) {
        error = "cannot bind control socket " + path + ": " + std::strerror(errno);
        close(fd);
        return -1;
    }
    // lchown: if the name was swapped for a link since bind, the link changes owner, not
    // the file it points to.
    if (fchownat(AT_FDCWD, path.c_str(), owner_uid, group ? *group : static_cast<gid_t>(-1),
                 AT_SYMLINK_NOFOLLOW) != 0) {
        error = "cannot set the owner of " + path + ": " + std::strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

int bind_http_socket(const SocketAddress& address, const char* what, std::string& error) {
    const int fd = socket(address.family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        error = "cannot create the " + std::string(what) + " socket: " + std::strerror(errno);
        return -1;
    }
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, address.sa(), address.length) != 0 || listen(fd, 16) != 0) {
        error = "cannot bind " + std::string(what) + " " + address.to_string() + ": " +
                std::strerror(errno);
        close(fd);
        return -1;
    }
    return fd;
}

}  // namespace nscache::control
