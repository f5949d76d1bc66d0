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
#include "common/mailbox.h"
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

// A worker's Mailbox of answers (common/mailbox.h): one wake-up per batch, not per item.
class CompletionQueue {
  public:
    explicit CompletionQueue(EventLoop& loop) : mailbox_(loop) {}

    // Any thread.
    void push(uint64_t cookie, const ResolveOutcome& outcome) { mailbox_.post({cookie, outcome}); }

    // The owning worker's thread.
    void drain(CompletionSink& sink) {
        mailbox_.drain([&sink](const std::pair<uint64_t, ResolveOutcome>& item) {
            sink.deliver(item.first, item.second);
        });
    }

  private:
    Mailbox<std::pair<uint64_t, ResolveOutcome>> mailbox_;
};

}  // namespace nscache::upstream
