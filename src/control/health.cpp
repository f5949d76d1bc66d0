// SPDX-License-Identifier: BSD-3-Clause
#include "control/health.h"

namespace nscache::control {

HealthReply liveness(const HealthSources& sources, uint64_t now_ms) {
    for (size_t i = 0; i < sources.loops.size(); ++i) {
        const uint64_t beat = sources.loops[i].heartbeat_ms.load(std::memory_order_relaxed);
        if (beat == 0 || beat == kHeartbeatFinished) continue;  // not started, or done
        if (now_ms > beat && now_ms - beat > kHeartbeatStaleMs) {
            return {503, "worker " + std::to_string(i) + " stalled for " +
                             std::to_string(now_ms - beat) + " ms\n"};
        }
    }
    return {200, "ok\n"};
}

HealthReply readiness(const HealthSources& sources, uint64_t now_ms) {
    const ReadinessState state =
        sources.readiness ? sources.readiness->state() : ReadinessState::Starting;
    if (state != ReadinessState::Ready) return {503, std::string(readiness_name(state)) + "\n"};
    return liveness(sources, now_ms);
}

}  // namespace nscache::control
