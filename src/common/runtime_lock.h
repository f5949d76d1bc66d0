// SPDX-License-Identifier: BSD-3-Clause
// One daemon per set of runtime paths. Before it touches anything, `nscache serve` takes an
// exclusive flock on PATH.lock beside each of its runtime paths (control socket, NSS socket,
// cache file): a second instance configured with any of the same paths stops at once with a
// message naming the holder, instead of unlinking and rebinding the first one's sockets.
// The locks are held until the object is destroyed (or the process exits). Main thread only.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"

namespace nscache {

class RuntimeLock {
  public:
    RuntimeLock() = default;
    ~RuntimeLock();
    RuntimeLock(const RuntimeLock&) = delete;
    RuntimeLock& operator=(const RuntimeLock&) = delete;

    // Locks every path (empty ones are skipped), creating their folders (0755) if needed.
    // On failure the message says which path and why, and no lock is kept.
    Result<void> acquire(const std::vector<std::string>& paths);

  private:
    void release();
    std::vector<int> fds_;
};

}  // namespace nscache
