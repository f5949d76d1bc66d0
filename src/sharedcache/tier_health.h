// SPDX-License-Identifier: BSD-3-Clause
// Whether each Redis node of the shared tier answers, shared by every thread's SharedTier: one
// thread that sees a node fail kFailuresBeforeDown times in a row marks it down for all (so
// the others skip it at once instead of each paying its own timeouts), one thread at a time
// probes it, and its answer brings it back for all.
//
// Thread-safety: the health fields are relaxed atomics (a heuristic, as upstream health is);
// the registry that maps a node's name to its entry is behind `mu_`, held for one search or
// insert, and entries never move (a thread keeps a pointer to each node it uses).
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <string>

#include "common/counters.h"
#include "common/mutex.h"

namespace nscache::sharedcache {

struct NodeHealth {
    static constexpr uint32_t kFailuresBeforeDown = 3;
    static constexpr uint64_t kProbeIntervalMs = 1000;

    std::string name;                   // "127.0.0.1:6379" or a socket path
    std::atomic<uint32_t> failures{0};  // in a row
    std::atomic<bool> down{false};
    // Bumped whenever the node goes down or comes back: a failure of a request sent before
    // (on a connection from before the change) is old news and counts nothing.
    std::atomic<uint64_t> epoch{0};
    std::atomic<uint64_t> next_probe_ms{0};

    // True when this call marked the node down.
    bool failed(uint64_t request_epoch, uint64_t now_ms);
    void succeeded(uint64_t request_epoch);
    // True when this thread should send the probe now (at most one per interval, all threads).
    bool claim_probe(uint64_t now_ms);
    // A probe got its answer: true when this call brought the node back.
    bool answered();
};

class TierHealth {
  public:
    static constexpr size_t kMaxNodes = 256;

    // The entry for `name`, added if new; null when kMaxNodes are known already.
    NodeHealth* node(const std::string& name);
    // Up when no node is down, down when all are, degraded in between; off with no nodes.
    SharedTierState state() const;

  private:
    mutable Mutex mu_;
    std::deque<NodeHealth> nodes_ NSCACHE_GUARDED_BY(mu_);
};

}  // namespace nscache::sharedcache
