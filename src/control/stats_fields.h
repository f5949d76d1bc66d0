// SPDX-License-Identifier: BSD-3-Clause
// The cache's counters as every stats format names them, shared by stats.cpp (text, JSON)
// and prometheus.cpp. Internal to control/.
#pragma once

#include <cstdint>

#include "cache/cache.h"

namespace nscache::control {

struct CacheField {
    const char* name;
    const char* help;
    uint64_t cache::CacheCounters::*field;
    bool gauge;  // a level now, not a total since start
};

inline constexpr CacheField kCacheFields[] = {
    {"cache_entries", "entries held now", &cache::CacheCounters::entries, true},
    {"cache_bytes", "bytes the cache accounts for now", &cache::CacheCounters::bytes, true},
    {"cache_budget_bytes", "the cache's byte budget", &cache::CacheCounters::budget, true},
    {"evictions", "entries removed to stay within the budget", &cache::CacheCounters::evictions,
     false},
    {"expirations", "expired entries reclaimed", &cache::CacheCounters::expirations, false},
    {"cache_inserts", "answers stored", &cache::CacheCounters::inserts, false},
};

}  // namespace nscache::control
