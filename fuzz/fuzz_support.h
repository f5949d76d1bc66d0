// SPDX-License-Identifier: BSD-3-Clause
// Shared by the fuzz targets: a fixed clock and a cache with a few entries in it.
#pragma once

#include <cstdint>
#include <string>

#include "cache/answer.h"
#include "cache/cache.h"
#include "dns/name.h"
#include "dns/response.h"

namespace nscache::fuzz {

inline constexpr uint64_t kNow = 1'000'000;
inline constexpr uint64_t kWallNow = 1'700'000'000'000;

inline void check(bool condition) {
    if (!condition) __builtin_trap();
}

// Work bound on compressed names. One walk of a name follows at most dns::kMaxPointerHops
// pointers, and a name that follows any takes at least 2 bytes of its message, so walking
// every name of a message `walks` times follows at most walks * kMaxPointerHops / 2 pointers
// per byte. A chain of pointers that every record points into breaks this (the hops grow
// with the square of the size): see fuzz/corpus/*/pointer_chain_bomb.
inline void start_work() {
#ifdef NSCACHE_WORK_COUNTERS
    dns::work_counters::pointer_hops = 0;
#endif
}
inline void check_work(size_t message_bytes, size_t walks) {
#ifdef NSCACHE_WORK_COUNTERS
    check(dns::work_counters::pointer_hops <= walks * dns::kMaxPointerHops / 2 * message_bytes);
#else
    (void)message_bytes;
    (void)walks;
#endif
}

// A cache holding an A answer for a.test and b.test.
inline cache::Cache& cache_with_entries() {
    static cache::Cache cache(cache::CacheConfig{.budget_bytes = 1 << 20});
    static bool filled = false;
    if (!filled) {
        filled = true;
        for (const char* name : {"a.test", "b.test"}) {
            auto wire = dns::name_from_text(name);
            cache::PreparedAnswer a;
            a.ancount = 1;
            a.ttl = 300;
            // owner: pointer to the question (offset 12), A IN 300 192.0.2.1
            a.records = {0xC0, 12, 0, 1, 0, 1, 0, 0, 1, 44, 0, 4, 192, 0, 2, 1};
            a.ttl_offsets = {6};
            cache.insert(cache::CacheKey{wire->view(), 1, 1, 0}, a, kNow);
        }
    }
    return cache;
}

}  // namespace nscache::fuzz
