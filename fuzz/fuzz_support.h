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
