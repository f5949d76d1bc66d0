// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/running_guard.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <thread>

namespace nscache::nscd {
namespace {

constexpr int kGuards = 2;

}  // namespace

RunningGuard& RunningGuard::instance(size_t map) {
    // Never destroyed: their threads live on. Made on first use, so that a process with no
    // user-database maps starts no threads for them.
    static Mutex mu;
    static RunningGuard* guards[kMaps] = {};
    MutexLock lock(mu);
    RunningGuard*& g = guards[map < kMaps ? map : 0];
    if (g == nullptr) g = new RunningGuard();
    return *g;
}

RunningGuard::RunningGuard() {
    for (int i = 0; i < kGuards; ++i) std::thread([this] { run(); }).detach();
}

uint64_t RunningGuard::guard(int32_t* flag) {
    MutexLock lock(mu_);
    target_ = flag;
    acks_ = 0;
    const uint64_t g = ++generation_;
    cv_.notify_all();
    return g;
}

bool RunningGuard::wait_acked(uint64_t g, int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (acked() < g) {
        if (std::chrono::steady_clock::now() > deadline) return false;
        std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
    return true;
}

// The condition variable needs a std::unique_lock, which the annotations cannot follow. The
// lock is held while the thread re-points and sets the flag, so once guard() returns no
// store to an earlier target can follow.
void RunningGuard::run() NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
    uint64_t mine = 0;
    std::unique_lock<Mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [&]() NSCACHE_NO_THREAD_SAFETY_ANALYSIS { return generation_ != mine; });
        mine = generation_;
        int32_t* flag = target_;
        // The kernel writes 0 there when this thread dies with the process.
        syscall(SYS_set_tid_address, flag);
        if (++acks_ == kGuards) {
            if (flag != nullptr) __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
            acked_.store(mine, std::memory_order_release);
        }
    }
}

}  // namespace nscache::nscd
