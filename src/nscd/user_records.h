// SPDX-License-Identifier: BSD-3-Clause
// passwd, group, initgroups and services entries as nscd's replies carry them (glibc's
// nscd/pwdcache.c, grpcache.c, initgrcache.c, servicescache.c): the bytes sent on the socket,
// which are also the records published in the database's map. One encoder for the proxy
// (other_databases.h) and the cache (user_database.h). Pure functions; any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "nscd/protocol.h"
#include "nsdb/entries.h"

namespace nscache::nscd {

// A null entry is the not-found reply (found 0), which a map holds as authoritatively as a
// found one: the client does not ask NSS after it.
// pw_response_header, then name, passwd, gecos, dir, shell (each NUL-terminated).
std::vector<uint8_t> passwd_record(const nsdb::PasswdEntry* entry);
// gr_response_header, the members' lengths (uint32 each: the client reads them in place and
// asserts their alignment, which a header of 24 bytes after a 24-byte datahead keeps), name,
// passwd, then the members.
std::vector<uint8_t> group_record(const nsdb::GroupEntry* entry);
// initgr_response_header, then ngrps int32 gids (the client adds the group it passed).
std::vector<uint8_t> initgroups_record(const std::vector<uint32_t>* gids);
// serv_response_header, name, proto, the aliases' lengths, then the aliases.
std::vector<uint8_t> service_record(const nsdb::ServiceEntry* entry);

// The "not served here" reply for `type` (found -1), or empty for a type that has none.
std::vector<uint8_t> declined_reply(RequestType type);

// Request keys as the client sends them (NUL included): a name, or an id as decimal
// ("%u"), or "name/proto" and "port/proto" for services (port in network byte order, as
// the caller passed it to getservbyport: port 80 is "20480/tcp" on x86). The extra keys nscd
// adds for a found entry (by name, by id) are these too.
std::vector<uint8_t> name_key(const std::string& name);
std::vector<uint8_t> id_key(uint32_t id);

// A string key: NUL-terminated with no NUL inside.
bool key_string(const std::vector<uint8_t>& key, std::string& out);
// A decimal id as the client writes it (nscd parses it with strtoul: "0" .. "4294967295").
std::optional<uint32_t> parse_id(const std::string& text);
// "crit/proto": proto may be empty (any protocol). False without a '/'.
bool split_service_key(const std::string& key, std::string& crit, std::string& proto);

}  // namespace nscache::nscd
