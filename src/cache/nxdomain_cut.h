// SPDX-License-Identifier: BSD-3-Clause
// NXDOMAIN cut (RFC 8020): an NXDOMAIN means nothing exists at or below the name, so a
// cached one answers every name below it without asking upstream (unbound's
// harden-below-nxdomain). It blunts random-subdomain floods: "rnd1.gone.example",
// "rnd2.gone.example"... cost the upstream one query for "gone.example", not one each.
//
// Each cached NXDOMAIN (not NODATA; without a CNAME before it, whose target it would speak
// for) is also kept under the marker type below, in a form that renders for any question:
// its SOA with every name written out, no compression pointer into the question it answered.
// The marker lives and dies with the NXDOMAIN (same TTL, born together, flushed by name).
// Pure functions; the cache calls them under no lock.
#pragma once

#include <cstdint>
#include <optional>

#include "cache/answer.h"
#include "dns/wire.h"

namespace nscache::cache {

// Type 0 is reserved (RFC 6895 §3.1): no client's question can meet it. Queries for TYPE0 are
// FORMERR (dns/query.cpp), Cache::insert refuses every answer under it, and Cache::lookup
// never returns it: only lookup_below_nxdomain reads the marker, and only Cache::insert
// writes it.
inline constexpr uint16_t kNxdomainMarkerType = 0;

// The marker for `answer`, an answer to a question for `lower_name`; nullopt when it is no
// plain NXDOMAIN or its records cannot be read.
std::optional<PreparedAnswer> nxdomain_marker(dns::Bytes lower_name, const PreparedAnswer& answer);

}  // namespace nscache::cache
