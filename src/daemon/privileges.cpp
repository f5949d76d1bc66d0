// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/privileges.h"

#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace nscache::daemon {

Result<UserIds> find_user(const std::string& name) {
    const passwd* pw = getpwnam(name.c_str());
    if (pw == nullptr) return Error{"user '" + name + "' does not exist"};
    return UserIds{pw->pw_uid, pw->pw_gid};
}

Result<void> drop_privileges(const std::string& name, const UserIds& ids) {
    if (initgroups(name.c_str(), ids.gid) != 0 || setgid(ids.gid) != 0 || setuid(ids.uid) != 0) {
        return Error{"cannot switch to user '" + name + "': " + std::strerror(errno)};
    }
    if (ids.uid != 0 && setuid(0) == 0)
        return Error{"privileges could be regained after the switch"};
    prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    return {};
}

}  // namespace nscache::daemon
