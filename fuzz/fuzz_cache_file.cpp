// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the cache-file loader. Whatever the bytes, loading either rejects the
// file or inserts entries that serve as well-formed answers.
#include <cstddef>
#include <cstdint>

#include "cache/cache.h"
#include "cache/cache_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    cache::Cache cache(cache::CacheConfig{.budget_bytes = 1 << 20, .shards = 1});
    const auto result =
        cache::load_cache_bytes(cache, data, size, cache::TtlPolicy{}, fuzz::kNow, fuzz::kWallNow);
    if (!result) {
        fuzz::check(cache.counters().entries == 0);
        fuzz::check(!result.error().empty());
    }
    return 0;
}
