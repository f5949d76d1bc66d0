// SPDX-License-Identifier: BSD-3-Clause
// One daemon per set of runtime paths. Before it touches anything, `nscache serve` takes an
// exclusive flock on PATH.lock beside each of its runtime paths (control socket, NSS socket,
// cache file): a second instance configured with any of the same paths stops at once with a
// message naming the holder, instead of unlinking and rebinding the first one's sockets.
// The locks are held until the object is destroyed (or the process exits). Main thread only.
#pragma once

#include <map>
#include <string>
#include <utility>
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
    // `inherited`: lock files a running instance handed over (takeover), by lock path
    // (PATH.lock). A flock belongs to the open file, not the process, so such a descriptor
    // already holds the lock: it is kept (if it is the regular file at that path) and the lock
    // never has a moment without an owner. Those used are removed from the map; the caller
    // closes the rest.
    Result<void> acquire(const std::vector<std::string>& paths,
                         std::map<std::string, int>* inherited = nullptr);
    // A takeover is confirmed: every lock file names this process (an inherited one still
    // named the instance that handed it over, which went on serving if this one failed).
    void claim_pid();
    // The lock files held, by lock path, for a takeover offer.
    const std::vector<std::pair<std::string, int>>& held() const { return fds_; }

  private:
    void release();
    std::vector<std::pair<std::string, int>> fds_;
};

}  // namespace nscache
