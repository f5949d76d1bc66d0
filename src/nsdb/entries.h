// SPDX-License-Identifier: BSD-3-Clause
// The entries of the user databases nscd caches besides hosts (passwd, group, services), as
// the daemon reads them from the files (files_db.h) or gets them from NSS modules
// (module_chain.h), and what one lookup came to. Plain values; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nscache::nsdb {

struct PasswdEntry {
    std::string name;
    std::string passwd;
    uint32_t uid = 0;
    uint32_t gid = 0;
    std::string gecos;
    std::string dir;
    std::string shell;
    bool operator==(const PasswdEntry&) const = default;
};

struct GroupEntry {
    std::string name;
    std::string passwd;
    uint32_t gid = 0;
    std::vector<std::string> members;  // in the order the source lists them
    bool operator==(const GroupEntry&) const = default;
};

struct ServiceEntry {
    std::string name;
    std::vector<std::string> aliases;
    int32_t port = 0;  // in network byte order, as struct servent's s_port
    std::string proto;
    bool operator==(const ServiceEntry&) const = default;
};

// What a lookup came to. `unavailable` is a source that could not answer (NSS_STATUS_TRYAGAIN
// or NSS_STATUS_UNAVAIL, an unreadable file, a module that failed): never "not found", and
// nothing negative may be cached from it.
enum class Status { found, not_found, unavailable };

template <typename Entry>
struct Found {
    Status status = Status::not_found;
    Entry entry;  // meaningful when status == found
    // groups_of only: a module said TRYAGAIN or UNAVAIL (glibc's internal_getgrouplist then
    // goes on to the next one): `entry` holds what the others gave, and is not the whole.
    bool incomplete = false;
};

using PasswdResult = Found<PasswdEntry>;
using GroupResult = Found<GroupEntry>;
using ServiceResult = Found<ServiceEntry>;
// initgroups: the supplementary gids of a user (found with an empty list is "member of
// nothing"), without duplicates, in the order the sources give them.
using GroupListResult = Found<std::vector<uint32_t>>;

}  // namespace nscache::nsdb
