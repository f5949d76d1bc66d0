// SPDX-License-Identifier: BSD-3-Clause
// Giving up root once the sockets are bound: switch to an unprivileged user and forbid
// regaining privileges.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace nscache {

struct UserIds {
    uid_t uid = 0;
    gid_t gid = 0;
};

// Looks the user up; nullopt with `error` set if it does not exist.
std::optional<UserIds> find_user(const std::string& name, std::string& error);

// Sets supplementary groups, gid and uid, then PR_SET_NO_NEW_PRIVS; verifies the switch.
std::optional<std::string> drop_privileges(const std::string& name, const UserIds& ids);

}  // namespace nscache
