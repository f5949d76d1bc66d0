// SPDX-License-Identifier: BSD-3-Clause
// How answers get back to the worker that holds the client. The worker that sent the upstream
// query delivers to its own clients directly and posts to the other workers' queues; each
// queue wakes its worker's event loop.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "cache/answer.h"
#include "common/event_loop.h"
#include "common/mutex.h"
#include "upstream/failure_cache.h"

namespace nscache::upstream {

struct ResolveOutcome {
    // The answer to relay; null when no upstream gave one in time (the client gets SERVFAIL).
    std::shared_ptr<const cache::PreparedAnswer> answer;
    // Why there is no answer, for the client's Extended DNS Error.
    FailureReason reason = FailureReason::NoReachableAuthority;
};

// Implemented by the server's worker: answers the client behind `cookie`.
class CompletionSink {
  public:
    virtual void deliver(uint64_t cookie, const ResolveOutcome& outcome) = 0;

  protected:
    ~CompletionSink() = default;
};

class CompletionQueue {
  public:
    explicit CompletionQueue(EventLoop& loop) : loop_(loop) {}

    // Any thread.
    void push(uint64_t cookie, const ResolveOutcome& outcome) {
        bool was_empty;
        {
            MutexLock lock(mu_);
            was_empty = items_.empty();
            items_.emplace_back(cookie, outcome);
        }
        if (was_empty) loop_.wake();  // one wake-up per batch, not per item
    }

    // The owning worker's thread.
    void drain(CompletionSink& sink) {
        {
            MutexLock lock(mu_);
            draining_.swap(items_);
        }
        for (const auto& [cookie, outcome] : draining_) sink.deliver(cookie, outcome);
        draining_.clear();
    }

  private:
    EventLoop& loop_;
    Mutex mu_;
    std::vector<std::pair<uint64_t, ResolveOutcome>> items_ NSCACHE_GUARDED_BY(mu_);
    std::vector<std::pair<uint64_t, ResolveOutcome>> draining_;  // only the owner touches it
};

}  // namespace nscache::upstream
