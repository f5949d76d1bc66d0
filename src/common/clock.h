// SPDX-License-Identifier: BSD-3-Clause
// Monotonic time in milliseconds, the unit every TTL and timer in nscache is kept in (and in
// microseconds, for latencies).
// Reading it is a vDSO call, no system call.
#pragma once

#include <cstdint>
#include <ctime>

namespace nscache {

inline uint64_t milliseconds(const timespec& ts) {
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

inline uint64_t microseconds(const timespec& ts) {
    return static_cast<uint64_t>(ts.tv_sec) * 1000000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

inline uint64_t monotonic_ms() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return milliseconds(ts);
}

inline uint64_t monotonic_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return microseconds(ts);
}

// Where an event loop reads the time: the system's monotonic clock in the daemon, a FakeClock
// (tests/unit/fake_clock.h) in unit tests, so that a timer or a deadline is crossed by
// advancing the clock instead of sleeping. Implementations are read from the loop's thread.
class Clock {
  public:
    virtual timespec now() const = 0;  // CLOCK_MONOTONIC's reading (or a fake one)

  protected:
    ~Clock() = default;
};

// CLOCK_MONOTONIC: one instance for the process, stateless, safe from every thread.
const Clock& system_clock();

inline uint64_t wall_ms() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000 + static_cast<uint64_t>(ts.tv_nsec) / 1000000;
}

}  // namespace nscache
