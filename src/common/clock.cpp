// SPDX-License-Identifier: BSD-3-Clause
#include "common/clock.h"

namespace nscache {
namespace {

class SystemClock final : public Clock {
  public:
    timespec now() const override {
        timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts;
    }
};

}  // namespace

const Clock& system_clock() {
    static const SystemClock clock;
    return clock;
}

}  // namespace nscache
