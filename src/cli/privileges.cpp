// SPDX-License-Identifier: BSD-3-Clause
#include "cli/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nscache {

std::optional<UserIds> find_user(const std::string& name, std::string& error) {
    const passwd* pw = getpwnam(name.c_str());
    if (pw == nullptr) {
        error = "user '" + name + "' does not exist";
        return std::nullopt;
    }
    return UserIds{pw->pw_uid, pw->pw_gid};
}

std::optional<std::string> drop_privileges(const std::string& name, const UserIds& ids) {
    if (initgroups(name.c_str(), ids.gid) != 0 || setgid(ids.gid) != 0 || setuid(ids.uid) != 0) {
        return "cannot switch to user '" + name + "': " + std::strerror(errno);
    }
    if (ids.uid != 0 && setuid(0) == 0) return "privileges could be regained after the switch";
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return std::nullopt;
}

}  // namespace nscache
