// SPDX-License-Identifier: BSD-3-Clause
// A clock that moves only when a test says so: pass it to an EventLoop, advance it, and run
// one turn (run_once(0)) to cross a timer or a deadline without waiting in real time.
// Starts at an arbitrary large time (never 0, which some code reads as "unset").
#pragma once

#include <cstdint>

#include "common/clock.h"

namespace nscache::testing {

class FakeClock final : public Clock {
  public:
    timespec now() const override { return now_; }

    void advance_ms(uint64_t ms) { advance_us(ms * 1000); }
    void advance_us(uint64_t us) {
        uint64_t ns = static_cast<uint64_t>(now_.tv_nsec) + (us % 1'000'000) * 1000;
        now_.tv_sec += static_cast<time_t>(us / 1'000'000 + ns / 1'000'000'000);
        now_.tv_nsec = static_cast<long>(ns % 1'000'000'000);
    }
    uint64_t now_ms() const { return milliseconds(now_); }

  private:
    timespec now_{1'000'000, 0};
};

}  // namespace nscache::testing
