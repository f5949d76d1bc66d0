// SPDX-License-Identifier: BSD-3-Clause
// nscd_certainly_running, kept true only while this process lives. While a map's flag is
// set, glibc's clients skip their staleness check (a clock read per lookup); the kernel
// clears it when the process dies, however it dies (SIGKILL, a crash), so no client keeps
// trusting a map nobody expires anymore. The kernel's clear-on-exit pointer
// (set_tid_address) is per thread, and a dying thread writes through it only while another
// thread still holds the process's memory: two idle guard threads point at the flag, and one
// of them is never the last to go. (nscd points its pruning threads at it; a process's last
// thread does not clear it.) The threads never exit while the process lives: glibc would
// otherwise wait on the thread id the kernel no longer clears.
// One per map a process writes (instance(map): hosts, passwd, group, services), each with its
// own two threads, since each points at its own map's flag; never destroyed (the threads live
// on). guard() is called from the host front's thread (the nscd socket's), wait_acked() only
// at start and stop.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>

#include "common/mutex.h"

namespace nscache::nscd {

// What the map writer needs of a guard (a test gives its own).
class FlagGuard {
  public:
    // Points the guard at `flag` (a map's nscd_certainly_running), which is set to 1 once it
    // does. Returns the generation of this request; never waits.
    virtual uint64_t guard(int32_t* flag) = 0;
    // The last generation the guard points at (nothing older is referenced anymore).
    virtual uint64_t acked() const = 0;
    // Waits (up to `timeout_ms`) until generation `g` is acked; false on timeout. Never on a
    // thread that answers clients.
    virtual bool wait_acked(uint64_t g, int timeout_ms) = 0;

  protected:
    ~FlagGuard() = default;
};

class RunningGuard final : public FlagGuard {
  public:
    static constexpr size_t kMaps = 4;
    // `map` < kMaps: 0 for hosts, then one per user database (user_database.h).
    static RunningGuard& instance(size_t map = 0);

    // Points both guard threads at `flag`; once both point there, the flag is set to 1.
    uint64_t guard(int32_t* flag) override;
    uint64_t acked() const override { return acked_.load(std::memory_order_acquire); }
    bool wait_acked(uint64_t g, int timeout_ms) override;

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
