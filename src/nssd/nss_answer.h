// SPDX-License-Identifier: BSD-3-Clause
// A host answer as the NSS module reads it: the status of nss/protocol.h and the payload
// encoding shared by the socket's responses and the map's slots. Pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "hostdb/host_answer.h"
#include "nss/protocol.h"

namespace nscache::nssd {

// enum nscache_nss_status of a host answer.
uint16_t nss_status(const hostdb::HostAnswer& answer);

std::vector<uint8_t> encode_payload(const hostdb::HostAnswer& answer);

}  // namespace nscache::nssd
