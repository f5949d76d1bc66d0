// SPDX-License-Identifier: BSD-3-Clause
// Fitting the daemon to the limits it runs under: the descriptor limit (raised to its hard
// maximum, then shared between workers' upstream sockets and everything else), and the memory
// bound of its cgroup (a cache budget above it would end in an OOM kill, so say so at start).
// Main thread, at start-up.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "config/config.h"

namespace nscache::daemon {

// Descriptors one upstream query may hold at once: its open UDP attempts and a TCP socket.
inline constexpr uint32_t kDescriptorsPerUpstreamQuery = 5;

// How many upstream queries each of `workers` may keep in flight so that, with everything
// else the config opens (listeners, TCP clients, NSS clients, probes...), the process stays
// within `descriptor_limit`. The host front's resolver holds that many for each protocol it
// serves (NSS, nscd: front/host_front.h), and is budgeted so. At most
// config.max_upstream_queries; at least 16 (or the configured value, if smaller), whatever the
// limit.
uint32_t fit_upstream_queries(uint64_t descriptor_limit, const Config& config, unsigned workers);

// Raises RLIMIT_NOFILE's soft limit to the hard one; returns the limit now in force.
uint64_t raise_descriptor_limit();

// The memory.max of our own cgroup (v2), if one is set.
std::optional<uint64_t> cgroup_memory_max();

}  // namespace nscache::daemon
