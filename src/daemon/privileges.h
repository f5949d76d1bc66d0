// SPDX-License-Identifier: BSD-3-Clause
// Giving up root once the sockets are bound: switch to an unprivileged user and forbid
// regaining privileges. Main thread, at start-up, before any other thread runs.
#pragma once

#include <sys/types.h>

#include <string>

#include "common/result.h"

namespace nscache::daemon {

struct UserIds {
    uid_t uid = 0;
    gid_t gid = 0;
};

// Looks the user up; an error if it does not exist.
Result<UserIds> find_user(const std::string& name);

// Sets supplementary groups, gid and uid, then PR_SET_NO_NEW_PRIVS; verifies the switch.
Result<void> drop_privileges(const std::string& name, const UserIds& ids);

}  // namespace nscache::daemon
