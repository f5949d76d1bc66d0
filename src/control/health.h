// SPDX-License-Identifier: BSD-3-Clause
// What GET /health and GET /ready answer (docs/interfaces.md): liveness from the event loops'
// heartbeats (common/readiness.h), readiness from the daemon's Readiness. Read on the control
// thread; every source is an atomic written by its own thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/counters.h"
#include "common/readiness.h"

namespace nscache::control {

struct HealthSources {
    const Readiness* readiness = nullptr;  // null: always starting
    // The blocks whose heartbeat_ms is checked (the DNS workers'); 0 in one means its loop
    // has not run yet, kHeartbeatFinished that it has finished its drain: neither is a failure.
    std::span<const WorkerCounters> loops;
};

struct HealthReply {
    int status = 200;
    std::string body;  // one line: "ok", "starting", "draining", "worker 2 stalled"
};

// 200 while every loop has beaten within kHeartbeatStaleMs of `now_ms` (the loops' clock,
// monotonic), 503 naming the first that has not.
HealthReply liveness(const HealthSources& sources, uint64_t now_ms);
// 200 when ready and live; 503 while starting, draining, or when a loop is stalled.
HealthReply readiness(const HealthSources& sources, uint64_t now_ms);

}  // namespace nscache::control
