// SPDX-License-Identifier: BSD-3-Clause
// Whether the daemon serves, as its health endpoint tells load balancers and Kubernetes: one
// atomic, owned by the Daemon, set by its main thread (ready once the cache file is loaded and
// every thread runs; draining from SIGTERM on), read by the control thread. It only moves
// forward: Starting -> Ready -> Draining (or Starting -> Draining when stopped before ready).
// Any thread.
//
// Liveness is each event loop's heartbeat: a loop stores its clock's time at least every
// kHeartbeatIntervalMs (a timer of its own, so an idle loop beats too); one that has not beaten
// for kHeartbeatStaleMs is wedged (a busy loop, a deadlock), and /health says so. A loop that
// has finished on purpose (a worker done with its drain, while others still drain) stores
// kHeartbeatFinished instead: no beat is due from it, and it is no failure.
#pragma once

#include <atomic>
#include <cstdint>

namespace nscache {

enum class ReadinessState : uint8_t { Starting, Ready, Draining };

inline constexpr uint64_t kHeartbeatIntervalMs = 1000;
inline constexpr uint64_t kHeartbeatStaleMs = 5000;
inline constexpr uint64_t kHeartbeatFinished = UINT64_MAX;

class Readiness {
  public:
    ReadinessState state() const { return state_.load(std::memory_order_acquire); }
    // Starting -> Ready; false (no change) once draining: a stopping daemon never turns ready.
    bool set_ready() {
        ReadinessState expected = ReadinessState::Starting;
        return state_.compare_exchange_strong(expected, ReadinessState::Ready,
                                              std::memory_order_acq_rel);
    }
    void set_draining() { state_.store(ReadinessState::Draining, std::memory_order_release); }

  private:
    std::atomic<ReadinessState> state_{ReadinessState::Starting};
};

inline const char* readiness_name(ReadinessState s) {
    switch (s) {
        case ReadinessState::Starting:
            return "starting";
        case ReadinessState::Ready:
            return "ready";
        case ReadinessState::Draining:
            return "draining";
    }
    return "starting";
}

}  // namespace nscache
