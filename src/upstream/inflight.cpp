// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/inflight.h"

#include <algorithm>

namespace nscache::upstream {

JoinResult InflightTable::join(const Question& key, const Waiter* waiter) {
    return shards_.with(shard_of(key), [&](Queries& queries) {
        auto [it, inserted] = queries.try_emplace(key);
        if (!inserted && waiter != nullptr && it->second.size() >= kMaxWaitersPerQuery) {
            return JoinResult::Full;
        }
        if (waiter != nullptr) it->second.push_back(*waiter);
        return inserted ? JoinResult::Leader : JoinResult::Joined;
    });
}

std::vector<Waiter> InflightTable::finish(const Question& key) {
    return shards_.with(shard_of(key), [&](Queries& queries) {
        auto it = queries.find(key);
        if (it == queries.end()) return std::vector<Waiter>{};
        std::vector<Waiter> waiters = std::move(it->second);
        queries.erase(it);
        return waiters;
    });
}

void InflightTable::leave(const Question& key, const Waiter& waiter) {
    shards_.with(shard_of(key), [&](Queries& queries) {
        auto it = queries.find(key);
        if (it == queries.end()) return;
        auto& list = it->second;
        auto w = std::find_if(list.begin(), list.end(), [&](const Waiter& x) {
            return x.worker == waiter.worker && x.cookie == waiter.cookie;
        });
        if (w != list.end()) list.erase(w);
    });
}

}  // namespace nscache::upstream
