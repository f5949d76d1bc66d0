// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/tier_health.h"

namespace nscache::sharedcache {

bool NodeHealth::failed(uint64_t request_epoch, uint64_t now_ms) {
    if (down.load(std::memory_order_relaxed) ||
        request_epoch != epoch.load(std::memory_order_relaxed)) {
        return false;
    }
    if (failures.fetch_add(1, std::memory_order_relaxed) + 1 < kFailuresBeforeDown) return false;
    bool expected = false;
    if (!down.compare_exchange_strong(expected, true, std::memory_order_relaxed)) return false;
    epoch.fetch_add(1, std::memory_order_relaxed);
    next_probe_ms.store(now_ms + kProbeIntervalMs, std::memory_order_relaxed);
    return true;
}

void NodeHealth::succeeded(uint64_t request_epoch) {
    if (request_epoch == epoch.load(std::memory_order_relaxed) &&
        failures.load(std::memory_order_relaxed) != 0) {
        failures.store(0, std::memory_order_relaxed);
    }
}

bool NodeHealth::claim_probe(uint64_t now_ms) {
    uint64_t next = next_probe_ms.load(std::memory_order_relaxed);
    return now_ms >= next && next_probe_ms.compare_exchange_strong(next, now_ms + kProbeIntervalMs,
                                                                   std::memory_order_relaxed);
}

bool NodeHealth::answered() {
    bool expected = true;
    if (!down.compare_exchange_strong(expected, false, std::memory_order_relaxed)) return false;
    failures.store(0, std::memory_order_relaxed);
    epoch.fetch_add(1, std::memory_order_relaxed);
    return true;
}

NodeHealth* TierHealth::node(const std::string& name) {
    MutexLock lock(mu_);
    for (NodeHealth& n : nodes_) {
        if (n.name == name) return &n;
    }
    if (nodes_.size() >= kMaxNodes) return nullptr;
    nodes_.emplace_back();
    nodes_.back().name = name;
    return &nodes_.back();
}

SharedTierState TierHealth::state() const {
    MutexLock lock(mu_);
    size_t down = 0;
    for (const NodeHealth& n : nodes_) down += n.down.load(std::memory_order_relaxed) ? 1 : 0;
    if (nodes_.empty()) return SharedTierState::Off;
    if (down == 0) return SharedTierState::Up;
    return down == nodes_.size() ? SharedTierState::Down : SharedTierState::Degraded;
}

}  // namespace nscache::sharedcache
