// SPDX-License-Identifier: BSD-3-Clause
// Mutex and MutexLock: std::mutex with clang's thread-safety annotations, so that the compiler
// (clang -Wthread-safety, a CI stage) checks that every member marked NSCACHE_GUARDED_BY(mu)
// is touched only with `mu` held. The macros expand to nothing for other compilers.
//
// The lock rule of the whole daemon (docs/architecture.md): a thread holds at most one of
// these at a time, and never calls out (into another layer, a callback, a system call that
// can block) while holding one.
#pragma once

#include <mutex>

#if defined(__clang__)
#define NSCACHE_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define NSCACHE_THREAD_ANNOTATION(x)
#endif

#define NSCACHE_CAPABILITY(x) NSCACHE_THREAD_ANNOTATION(capability(x))
#define NSCACHE_SCOPED_CAPABILITY NSCACHE_THREAD_ANNOTATION(scoped_lockable)
#define NSCACHE_GUARDED_BY(x) NSCACHE_THREAD_ANNOTATION(guarded_by(x))
#define NSCACHE_PT_GUARDED_BY(x) NSCACHE_THREAD_ANNOTATION(pt_guarded_by(x))
#define NSCACHE_REQUIRES(...) NSCACHE_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define NSCACHE_EXCLUDES(...) NSCACHE_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define NSCACHE_ACQUIRE(...) NSCACHE_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define NSCACHE_RELEASE(...) NSCACHE_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define NSCACHE_TRY_ACQUIRE(...) NSCACHE_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
#define NSCACHE_NO_THREAD_SAFETY_ANALYSIS NSCACHE_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace nscache {

class NSCACHE_CAPABILITY("mutex") Mutex {
  public:
    void lock() NSCACHE_ACQUIRE() { mu_.lock(); }
    void unlock() NSCACHE_RELEASE() { mu_.unlock(); }
    bool try_lock() NSCACHE_TRY_ACQUIRE(true) { return mu_.try_lock(); }

  private:
    std::mutex mu_;
};

// Holds `mu` for the scope.
class NSCACHE_SCOPED_CAPABILITY MutexLock {
  public:
    explicit MutexLock(Mutex& mu) NSCACHE_ACQUIRE(mu) : mu_(mu) { mu_.lock(); }
    ~MutexLock() NSCACHE_RELEASE() { mu_.unlock(); }
    MutexLock(const MutexLock&) = delete;
    MutexLock& operator=(const MutexLock&) = delete;

  private:
    Mutex& mu_;
};

}  // namespace nscache
