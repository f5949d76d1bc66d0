// SPDX-License-Identifier: BSD-3-Clause
// A token bucket over a loop's millisecond clock, for the frames an HTTP/2 client may send
// often but never in floods: SETTINGS and PING (each makes the server queue an ACK), and
// RST_STREAM (CVE-2023-44487, "rapid reset": a stream opened and reset at once costs the
// server a query each time while never counting against the concurrent-stream limit).
// `burst` frames at once, then `per_second`. Used from one connection's thread.
#pragma once

#include <algorithm>
#include <cstdint>

namespace nscache::server {

class FrameBudget {
  public:
    FrameBudget(uint32_t burst, uint32_t per_second)
        : burst_milli_(uint64_t{burst} * 1000), per_second_(per_second), milli_(burst_milli_) {}

    // Spends one frame at `now_ms`; false when the bucket is empty (the peer floods).
    bool take(uint64_t now_ms) {
        if (now_ms > last_ms_) {
            // Tokens in thousandths: refills of a few milliseconds are not rounded away.
            milli_ = std::min(burst_milli_, milli_ + (now_ms - last_ms_) * per_second_);
            last_ms_ = now_ms;
        }
        if (milli_ < 1000) return false;
        milli_ -= 1000;
        return true;
    }

  private:
    const uint64_t burst_milli_;
    const uint64_t per_second_;
    uint64_t milli_;
    uint64_t last_ms_ = 0;
};

}  // namespace nscache::server
