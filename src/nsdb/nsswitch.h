// SPDX-License-Identifier: BSD-3-Clause
// /etc/nsswitch.conf read as glibc reads it (nss/nss_database.c), and what it means for the
// nscd front's `auto` policy: which databases are plain files, which are files followed by
// other sources, and which must be proxied through glibc's own NSS calls. Pure functions and
// plain values; any thread.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace nscache::nsdb {

struct SwitchLine {
    std::vector<std::string> services;  // in order: "files", "systemd", "sss", ...
    // Any [STATUS=action] item: the line's meaning is more than "ask each in turn until one
    // finds it", so only glibc's own NSS calls reproduce it.
    bool has_actions = false;
    bool present = false;  // false: the database has no line, glibc's default applies
    // Only for line("initgroups"): true when there is no initgroups line and this is the
    // group line in its place. glibc's internal_getgrouplist (grp/initgroups.c) then asks
    // every source and merges their groups even after one says SUCCESS; with an initgroups
    // line of its own, the first SUCCESS ends the lookup (the default SUCCESS=return).
    bool merge_groups = false;
};

class NsswitchConf {
  public:
    static NsswitchConf parse(std::string_view text);
    // nullopt when the file cannot be read (error says why); a missing file is glibc's
    // defaults (every database "files"), not an error.
    static std::optional<NsswitchConf> read(const std::string& path, std::string& error);

    // The line of `database` ("passwd", "group", "initgroups", "services", "netgroup"); with
    // no line, glibc's default for it ("files" for these; "initgroups" falls back to
    // "group"'s line, as glibc does).
    SwitchLine line(std::string_view database) const;

  private:
    std::unordered_map<std::string, SwitchLine> lines_;
};

// How the front serves a database whose policy is `auto`.
enum class Plan {
    files_only,          // every source is files (or compat with no +/- lines): cache it all
    files_then_modules,  // files first, then `modules`: files' entries cached exactly, the rest
                         // asked every time of the modules, never cached as not found
    proxy,               // anything else: glibc's own NSS calls, uncached
};

struct SourcePlan {
    Plan plan = Plan::proxy;
    std::vector<std::string> modules;  // files_then_modules: the services after files
};

// `compat_lines`: the database's file has +/- lines (PasswdFile/GroupFile::compat_lines()).
SourcePlan plan_for(const SwitchLine& line, size_t compat_lines);

}  // namespace nscache::nsdb
