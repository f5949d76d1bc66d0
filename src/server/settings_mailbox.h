// SPDX-License-Identifier: BSD-3-Clause
// Where the main thread leaves new Settings for a worker (or the NSS thread) to pick up on its
// own thread when it next wakes. Only the latest matters: a second post before the pickup
// replaces the first. Thread-safe (one mutex, held for a pointer swap).
#pragma once

#include <utility>

#include "common/mutex.h"
#include "server/settings.h"

namespace nscache::server {

class SettingsMailbox {
  public:
    void post(SettingsPtr settings) {
        MutexLock lock(mu_);
        pending_ = std::move(settings);
    }
    // The settings posted since the last take, or null.
    SettingsPtr take() {
        MutexLock lock(mu_);
        return std::move(pending_);
    }

  private:
    Mutex mu_;
    SettingsPtr pending_ NSCACHE_GUARDED_BY(mu_);
};

}  // namespace nscache::server
