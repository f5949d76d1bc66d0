// SPDX-License-Identifier: BSD-3-Clause
// /etc/passwd, /etc/group and /etc/services read as glibc's `files` module reads them, indexed
// for lookups by name, id, membership and port: what the nscd front answers from itself
// (with exact invalidation on a change) before it asks any other NSS source. Built once per
// change of the file, then read-only: any thread may read a built index; building it is a
// pass over the file (a 10,000-user /etc/passwd: a few milliseconds).
//
// Matching follows nss_files: the first line that matches wins; a malformed line is skipped,
// never an error; comments (#) and blank lines are skipped. A line that starts with '+' or
// '-' is a `compat` line: counted in compat_lines() (nsswitch.h: such a file is not plain
// files, the front then proxies) and otherwise skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "nsdb/entries.h"

namespace nscache::nsdb {

class PasswdFile {
  public:
    static PasswdFile parse(std::string_view text);
    // nullopt when the file cannot be read (then `error` says why; a missing file is
    // unreadable too: glibc's files module answers UNAVAIL).
    static std::optional<PasswdFile> read(const std::string& path, std::string& error);

    const PasswdEntry* by_name(std::string_view name) const;
    const PasswdEntry* by_uid(uint32_t uid) const;
    size_t size() const { return entries_.size(); }
    size_t compat_lines() const { return compat_lines_; }

  private:
    std::vector<PasswdEntry> entries_;
    std::unordered_map<std::string, size_t> by_name_;  // first line of each name
    std::unordered_map<uint32_t, size_t> by_uid_;      // first line of each uid
    size_t compat_lines_ = 0;
};

class GroupFile {
  public:
    static GroupFile parse(std::string_view text);
    static std::optional<GroupFile> read(const std::string& path, std::string& error);

    const GroupEntry* by_name(std::string_view name) const;
    const GroupEntry* by_gid(uint32_t gid) const;
    // The gids of the groups that list `user` as a member, in file order, without
    // duplicates (what files' initgroups_dyn adds; the caller adds the primary group).
    std::vector<uint32_t> groups_of(std::string_view user) const;
    size_t size() const { return entries_.size(); }
    size_t compat_lines() const { return compat_lines_; }

  private:
    std::vector<GroupEntry> entries_;
    std::unordered_map<std::string, size_t> by_name_;
    std::unordered_map<uint32_t, size_t> by_gid_;
    std::unordered_map<std::string, std::vector<uint32_t>> member_of_;
    size_t compat_lines_ = 0;
};

class ServicesFile {
  public:
    static ServicesFile parse(std::string_view text);
    static std::optional<ServicesFile> read(const std::string& path, std::string& error);

    // getservbyname(name, proto): `name` matches the name or an alias; an empty `proto`
    // matches any protocol (the first line that matches the name).
    const ServiceEntry* by_name(std::string_view name, std::string_view proto) const;
    // getservbyport(port, proto): `port` in network byte order, as the caller passes it.
    const ServiceEntry* by_port(int32_t port, std::string_view proto) const;
    size_t size() const { return entries_.size(); }

  private:
    std::vector<ServiceEntry> entries_;
    std::unordered_multimap<std::string, size_t> by_name_;  // names and aliases, file order
    std::unordered_multimap<int32_t, size_t> by_port_;
};

}  // namespace nscache::nsdb
