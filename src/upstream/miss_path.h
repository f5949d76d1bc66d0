// SPDX-License-Identifier: BSD-3-Clause
// What a question meets between the cache and the upstream, for every client alike: the DNS
// pipeline (server/query_pipeline.h) and the host lookup behind glibc (hostdb/host_lookup.h)
// both go through these two steps, so serve-stale, prefetch and the failure cache decide the
// same way for both; coalescing follows in Forwarder::resolve. Called on the worker's thread;
// the callbacks run synchronously, inside the call.
//
// Guarantees
// - on_hit() and decide_miss() never deliver: whatever they answer is answered by the
//   caller's callback now; a miss they let through is asked with Forwarder::resolve, which
//   delivers later, never from inside the call (upstream/forwarder.h). Both users therefore
//   share one completion contract: a hit (fresh, stale at once, a failure-cache hit) answers
//   synchronously, a question asked upstream always later.
// - Order of the miss decisions, as RFC 8767 §5, RFC 8020 and RFC 9520 §3.2 rank them:
//   stale at once (serve-expired, or every upstream down), then the NXDOMAIN cut (callers
//   that apply it), then the failure cache, with a stale entry taking precedence over it.
#pragma once

#include "upstream/failure_cache.h"
#include "upstream/forwarder.h"
#include "upstream/question.h"

namespace nscache::upstream {

// A fresh hit's part: a popular entry near expiry (the cache said `prefetch`) is refreshed in
// the background when prefetch is on. Returns whether a refresh was started.
inline bool on_hit(Forwarder& forwarder, const Question& question, bool prefetch_due,
                   bool prefetch_on) {
    if (!prefetch_due || !prefetch_on) return false;
    forwarder.refresh(question);
    return true;
}

struct MissDecision {
    enum class Kind : uint8_t { Ask, Answered, Failing };
    Kind kind = Kind::Ask;
    bool failure_cached = false;  // the failure cache held the question (answered or not)
    FailureReason reason{};       // Failing: why
};

// A miss: `stale_available` (a stale entry is kept and serve-stale is on). `serve_stale()`
// answers from the stale entry (false when there is none any more); `cut()` answers from a
// cached NXDOMAIN above the name (false: none, or the caller does not apply the cut).
template <typename ServeStale, typename Cut>
MissDecision decide_miss(Forwarder& forwarder, const Question& question, bool stale_available,
                         bool serve_expired, ServeStale&& serve_stale, Cut&& cut) {
    MissDecision d;
    if (stale_available && (serve_expired || forwarder.all_upstreams_down(question))) {
        // RFC 8767 §5: with every upstream down, answer from stale data at once. With
        // serve-expired (opt-in, as unbound's option of that name) always: the client never
        // waits for a refresh, which goes on in the background.
        if (serve_stale()) {
            forwarder.refresh(question);
            d.kind = MissDecision::Kind::Answered;
            return d;
        }
    }
    if (cut()) {
        d.kind = MissDecision::Kind::Answered;
        return d;
    }
    // RFC 9520 §3.2: a question no upstream answered a moment ago is not asked again yet.
    if (forwarder.failing(question, &d.reason)) {
        d.failure_cached = true;
        // Serve-stale takes precedence.
        d.kind = stale_available && serve_stale() ? MissDecision::Kind::Answered
                                                  : MissDecision::Kind::Failing;
    }
    return d;
}

}  // namespace nscache::upstream
