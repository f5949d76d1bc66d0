// nscd_certainly_running, kept true only while this process lives. While a map's flag is
// set, glibc's clients skip their staleness check (a clock read per lookup); the kernel
// clears it when the process dies, however it dies (SIGKILL, a crash), so no client keeps
// trusting a map nobody expires anymore. The kernel's clear-on-exit pointer
// (set_tid_address) is per thread, and a dying thread writes through it only while another
// thread still holds the process's memory: two idle guard threads point at the flag, and one
// of them is never the last to go. (nscd points its pruning threads at it; a process's last
// thread does not clear it.) The threads never exit while the process lives: glibc would
// otherwise wait on the thread id the kernel no longer clears.
// One per process (instance()); guard() and wait_acked() are called from the nscd thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>

#include "common/mutex.h"

namespace nscache::nscd {

class RunningGuard {
  public:
    static RunningGuard& instance();

    // Points both guard threads at `flag` (a map's nscd_certainly_running); once both point
    // there, the flag is set to 1. Returns the generation of this request.
    uint64_t guard(int32_t* flag);
    // The last generation both guards point at (nothing older is referenced anymore).
    uint64_t acked() const { return acked_.load(std::memory_order_acquire); }
    // Waits (up to `timeout_ms`) until generation `g` is acked; false on timeout.
    bool wait_acked(uint64_t g, int timeout_ms);

  private:
    RunningGuard();
    void run();

    Mutex mu_;
    std::condition_variable_any cv_;
    int32_t* target_ NSCACHE_GUARDED_BY(mu_) = nullptr;
    uint64_t generation_ NSCACHE_GUARDED_BY(mu_) = 0;
    uint64_t acks_ NSCACHE_GUARDED_BY(mu_) = 0;  // guards pointing at generation_
    std::atomic<uint64_t> acked_{0};
};

}  // namespace nscache::nscd
