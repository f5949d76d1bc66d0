// SPDX-License-Identifier: BSD-3-Clause
#include "control/peer_access.h"

#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <vector>

namespace nscache::control {
namespace {

// The peer's supplementary groups as they were when it connected.
bool peer_has_supplementary_group(int fd, gid_t gid) {
    std::vector<gid_t> groups(64);
    for (int attempt = 0; attempt < 2; ++attempt) {
        auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
            groups.resize(len / sizeof(gid_t));
            return std::find(groups.begin(), groups.end(), gid) != groups.end();
        }
        // ERANGE: the list is longer, and `len` now says how long.
        if (errno != ERANGE) return false;
        groups.resize(len / sizeof(gid_t) + 1);
    }
    return false;
}

}  // namespace

bool peer_may_control(int fd, const ControlAccess& access) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
    if (cred.uid == 0 || cred.uid == access.owner_uid) return true;
    if (!access.group) return false;
    return cred.gid == *access.group || peer_has_supplementary_group(fd, *access.group);
}

bool peer_may_take_over(int fd, const ControlAccess& access) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
    return uid_may_take_over(cred.uid, access);
}

bool uid_may_take_over(uid_t peer_uid, const ControlAccess& access) {
    return peer_uid == 0 || (peer_uid == access.owner_uid && !access.owner_switched);
}

}  // namespace nscache::control
