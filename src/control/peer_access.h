// SPDX-License-Identifier: BSD-3-Clause
// Who may use the control socket: root, the daemon's own user, and members of control-group
// (through their primary group or a supplementary one), read from the kernel's record of the
// connecting process (SO_PEERCRED, SO_PEERGROUPS), never from anything the client says.
// Any thread.
#pragma once

#include <sys/types.h>

#include <optional>

namespace nscache::control {

struct ControlAccess {
    uid_t owner_uid = 0;
    std::optional<gid_t> group;  // control-group, when set
    // The daemon started as root (or another user) and switched to owner_uid: what it would
    // hand over (sockets bound as root, the nscd and NSS sockets root's processes trust, the
    // lock files, the cache) is more than owner_uid has, so only root may take it over.
    bool owner_switched = false;
};

bool peer_may_control(int fd, const ControlAccess& access);
// Handing the daemon's sockets and cache to another process: root, or the daemon's own user
// when the daemon never switched to it (started as that user); never control-group (its
// members could otherwise serve, or read, every query).
bool peer_may_take_over(int fd, const ControlAccess& access);
// The same decision for a peer's uid.
bool uid_may_take_over(uid_t peer_uid, const ControlAccess& access);

}  // namespace nscache::control
