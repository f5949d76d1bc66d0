// SPDX-License-Identifier: BSD-3-Clause
// How long an answer stays fresh for an HTTP cache: DNS over HTTPS answers say it in
// `cache-control: max-age` (RFC 8484 §5.1). Pure function on the answer's bytes.
#pragma once

#include <cstdint>

#include "dns/wire.h"

namespace nscache::dns {

// The smallest TTL of the answer's records (every section, the OPT pseudo-record aside); for
// an SOA, the smaller of its TTL and its MINIMUM (RFC 2308 §5: how long the negative answer it
// comes with may be kept). 0 for an answer with no records, for an RCODE other than NOERROR
// and NXDOMAIN (an error is not to be cached by HTTP caches), and for a message that does not
// parse.
uint32_t answer_min_ttl(Bytes answer);

}  // namespace nscache::dns
