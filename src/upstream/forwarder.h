// SPDX-License-Identifier: BSD-3-Clause
// Forwarder: what the query pipeline needs from the forwarding layer, as an interface, so the
// pipeline and the TCP code can be tested with a fake one (tests/unit/server/).
//
// Contract, which the pipeline relies on to stay re-entrancy free:
// - resolve() never answers from inside the call. It returns true and later (from the event
//   loop, never within resolve()) delivers exactly one outcome for `cookie` to the worker's
//   CompletionSink; or it returns false and delivers nothing: the caller answers itself.
// - leave() means the client was answered otherwise; no outcome follows for that cookie.
// All calls come from the owning worker's thread.
#pragma once

#include <cstdint>

#include "upstream/failure_cache.h"
#include "upstream/question.h"

namespace nscache::upstream {

class Forwarder {
  public:
    virtual bool resolve(const Question& question, uint64_t cookie) = 0;
    // As resolve(), for a question nscache answers itself only (local names and zones,
    // CHAOS): false, and nothing delivered, when it would have to go upstream. For queries
    // without RD, which are never forwarded (RFC 1034 §4.3.1).
    virtual bool resolve_local(const Question& question, uint64_t cookie) = 0;
    // Refreshes the cache entry for `question` in the background (prefetch, stale refresh).
    virtual void refresh(const Question& question) = 0;
    virtual void leave(const Question& question, uint64_t cookie) = 0;
    // Whether every upstream `question` would go to is marked down (serve-stale answers at
    // once then).
    virtual bool all_upstreams_down(const Question& question) const = 0;
    // True when `question` failed recently (RFC 9520 §3.2: no upstream is asked again for it
    // yet); `reason` says why.
    virtual bool failing(const Question& question, FailureReason* reason) = 0;

  protected:
    ~Forwarder() = default;
};

}  // namespace nscache::upstream
