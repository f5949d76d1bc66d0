// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/inflight.h"

#include <algorithm>
#include "common/hash.h"
#include "common/random.h"

namespace nscache::upstream {

size_t InflightTable::SeededHash::operator()(const std::string& key) const {
    return seeded_hash(seed, reinterpret_cast<const uint8_t*>(key.data()), key.size());
}

InflightTable::InflightTable() : hash_{secure_random_u64()} {
    for (Shard& shard : shards_) {
        MutexLock lock(shard.mu);
        shard.queries = decltype(shard.queries)(16, hash_);
    }
}

InflightTable::Shard& InflightTable::shard_for(const std::string& key) {
    return shards_[(hash_(key) >> 60) % kShards];
}

JoinResult InflightTable::join(const std::string& key, const Waiter* waiter) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    auto [it, inserted] = shard.queries.try_emplace(key);
    if (!inserted && waiter != nullptr && it->second.size() >= kMaxWaitersPerQuery) {
        return JoinResult::Full;
    }
    if (waiter != nullptr) it->second.push_back(*waiter);
    return inserted ? JoinResult::Leader : JoinResult::Joined;
}

std::vector<Waiter> InflightTable::finish(const std::string& key) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    auto it = shard.queries.find(key);
    if (it == shard.queries.end()) return {};
    std::vector<Waiter> waiters = std::move(it->second);
    shard.queries.erase(it);
    return waiters;
}

void InflightTable::leave(const std::string& key, const Waiter& waiter) {
    Shard& shard = shard_for(key);
    MutexLock lock(shard.mu);
    auto it = shard.queries.find(key);
    if (it == shard.queries.end()) return;
    auto& list = it->second;
    list.erase(std::remove_if(list.begin(), list.end(),
                              [&](const Waiter& w) {
                                  return w.worker == waiter.worker && w.cookie == waiter.cookie;
                              }),
               list.end());
}

}  // namespace nscache::upstream
