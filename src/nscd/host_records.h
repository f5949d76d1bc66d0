// SPDX-License-Identifier: BSD-3-Clause
// A host answer as nscd's replies carry it (nscd/protocol.h): the bytes sent on the socket,
// which are also the record published in the map. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "hostdb/host_answer.h"
#include "nscd/protocol.h"

namespace nscache::nscd {

// GETHOSTBYNAME[v6] and GETHOSTBYADDR[v6]: a hostent. A negative answer carries the h_errno
// glibc's dns module would set (HOST_NOT_FOUND or NO_DATA); call only for Found, NotFound and
// NoData.
std::vector<uint8_t> host_reply(RequestType type, const hostdb::HostAnswer& answer);

// GETAI: the addresses of both families (the client keeps those of the family asked), their
// families and the canonical name. Found and NotFound only.
std::vector<uint8_t> ai_reply(const hostdb::HostAnswer& answer);

// "This database is not served here" (found = -1): the client asks NSS itself.
std::vector<uint8_t> host_disabled_reply();

}  // namespace nscache::nscd
