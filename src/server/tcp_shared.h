// SPDX-License-Identifier: BSD-3-Clause
// What all workers' TCP connections share: the limits, and the counts behind the caps and the
// bytes queued. Thread-safe (atomics and ClientCounts' own locks).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "server/client_counts.h"

namespace nscache::server {

struct TcpLimits {
    uint32_t idle_timeout_ms = 10'000;
    uint32_t read_timeout_ms = 5'000;  // from a query's first byte to its last
    uint32_t max_connections = 1024;   // all workers together
    uint32_t max_per_client = 64;      // per client address, all workers together
};

// What all workers' TCP connections share: the counts behind the caps and the bytes queued.
struct TcpShared {
    std::atomic<uint32_t> connections{0};
    std::atomic<size_t> queued_bytes{0};
    ClientCounts per_client;
};

}  // namespace nscache::server
