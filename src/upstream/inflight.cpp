// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/inflight.h"

#include <algorithm>
#include "common/hash.h"
#include "common/random.h"

namespace nscache::upstream {

size_t InflightTable::SeededHash::operator()(const std::string& key) const {
    return seeded_hash(seed, reinterpret_cast<const uint8_t*>(key.data()), key.size());
}

InflightTable::InflightTable() : hash_{secure_random_u64()}, shards_(size_t{16}, hash_) {}

JoinResult InflightTable::join(const std::string& key, const Waiter* waiter) {
    return shards_.with(shard_of(key), [&](Queries& queries) {
        auto [it, inserted] = queries.try_emplace(key);
        if (!inserted && waiter != nullptr && it->second.size() >= kMaxWaitersPerQuery) {
            return JoinResult::Full;
        }
        if (waiter != nullptr) it->second.push_back(*waiter);
        return inserted ? JoinResult::Leader : JoinResult::Joined;
    });
}

std::vector<Waiter> InflightTable::finish(const std::string& key) {
    return shards_.with(shard_of(key), [&](Queries& queries) {
        auto it = queries.find(key);
        if (it == queries.end()) return std::vector<Waiter>{};
        std::vector<Waiter> waiters = std::move(it->second);
        queries.erase(it);
        return waiters;
    });
}

void InflightTable::leave(const std::string& key, const Waiter& waiter) {
    shards_.with(shard_of(key), [&](Queries& queries) {
        auto it = queries.find(key);
        if (it == queries.end()) return;
        auto& list = it->second;
        list.erase(std::remove_if(list.begin(), list.end(),
                                  [&](const Waiter& w) {
                                      return w.worker == waiter.worker && w.cookie == waiter.cookie;
                                  }),
                   list.end());
    });
}

}  // namespace nscache::upstream
