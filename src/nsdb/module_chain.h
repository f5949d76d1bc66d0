// SPDX-License-Identifier: BSD-3-Clause
// Asks NSS modules (libnss_<service>.so.2, loaded with dlopen) directly, as glibc's NSS does
// for a line with no [STATUS=action] items: each in turn until one answers SUCCESS. Calling
// the modules, not getpwnam_r, gives the front the exact status (TRYAGAIN and UNAVAIL are
// not "not found"), asks only the sources after `files` (which the front reads itself), and
// never goes through glibc's nscd client.
//
// The result is `found` from the first module that finds it; `not_found` when every module
// said NOTFOUND; `unavailable` when none found it and one said TRYAGAIN or UNAVAIL (or failed
// in another way: a buffer past 1 MiB, a missing function). A module that is not installed
// (dlopen fails) is skipped, as a source that is not there is not one that is down; it is
// logged once, and loaded when a chain is next built (every replan) or, failing that, at the
// first lookup a minute after the last attempt. ERANGE grows the buffer (to 1 MiB).
//
// Thread-safe: the pool threads call it at once; modules are loaded at first use (shared by
// every chain of the process) and, once loaded, kept. Calls may block for as long as a module does:
// never on a thread that answers clients.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "nsdb/entries.h"

namespace nscache::nsdb {

class ModuleChain {
  public:
    explicit ModuleChain(std::vector<std::string> services);
    // Loads the modules from `module_folder` (an absolute path) instead of the dynamic
    // linker's search path: for tests, whose module is in the build tree. Empty: the default.
    ModuleChain(std::vector<std::string> services, std::string module_folder);
    // As above, with `clock` (read from the pool's threads) timing the retries of a module
    // that failed to load: tests pass a FakeClock.
    ModuleChain(std::vector<std::string> services, std::string module_folder, const Clock& clock);
    ~ModuleChain();
    ModuleChain(const ModuleChain&) = delete;
    ModuleChain& operator=(const ModuleChain&) = delete;

    const std::vector<std::string>& services() const { return services_; }

    PasswdResult passwd_by_name(const std::string& name);
    PasswdResult passwd_by_uid(uint32_t uid);
    GroupResult group_by_name(const std::string& name);
    GroupResult group_by_gid(uint32_t gid);
    // initgroups_dyn of every module in turn (all of them, as glibc merges them), without
    // `primary_gid` and without duplicates. `found` when any module said SUCCESS
    // (`incomplete` when another said TRYAGAIN or UNAVAIL: its groups, if any, are kept, as
    // glibc keeps them); a module
    // without initgroups_dyn is enumerated (setgrent/getgrent_r/endgrent, one at a time).
    GroupListResult groups_of(const std::string& user, uint32_t primary_gid);
    // As above with `merge_all` false: the first module that says SUCCESS ends it, as glibc
    // does when nsswitch.conf has an initgroups line of its own (SwitchLine::merge_groups).
    GroupListResult groups_of(const std::string& user, uint32_t primary_gid, bool merge_all);
    // `proto` empty: any protocol. `port` in network byte order.
    ServiceResult service_by_name(const std::string& name, const std::string& proto);
    ServiceResult service_by_port(int32_t port, const std::string& proto);

  private:
    struct Module;
    uint64_t now_ms() const;
    const Clock& clock_;
    std::vector<std::string> services_;
    std::vector<std::unique_ptr<Module>> modules_;
};

}  // namespace nscache::nsdb
