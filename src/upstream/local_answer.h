// SPDX-License-Identifier: BSD-3-Clause
// The answers nscache gives itself, without asking upstream: local names (local-records, the
// hosts file), localhost (RFC 6761 §6.3), the zones kept local (NXDOMAIN with an SOA so
// clients cache it), and CHAOS-class identity queries (version.bind, id.server...), which are
// never forwarded (they would reveal the upstream's identity, not ours).
//
// Built as an upstream answer would be (records after the question; owner names point at the
// question's name, offset 12), so the renderer serves them like any other. Never cached:
// local data changes with the config and the hosts file. Pure functions.
#pragma once

#include <cstdint>
#include <string>

#include "cache/answer.h"
#include "upstream/question.h"
#include "upstream/routing.h"

namespace nscache::upstream {

inline constexpr uint16_t kClassChaos = 3;

// For a question whose route is not Forward. `ttl`: the TTL of every record (local-ttl).
cache::PreparedAnswer local_answer(const Routing& routing, const Route& route,
                                   const Question& question, uint32_t ttl);

// For a CHAOS-class question: TXT with `version` for version.bind/version.server, with `id`
// for id.server/hostname.bind; REFUSED for anything else or when the string is empty.
cache::PreparedAnswer chaos_answer(const Question& question, const std::string& version,
                                   const std::string& id);

}  // namespace nscache::upstream
