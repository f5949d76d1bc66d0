// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the cache-file loader. Whatever the bytes, loading either rejects the
// file or inserts entries that serve as well-formed answers; the one-pass load of start-up
// (a private cache) rejects and accepts the same files, inserting as many, and leaves the
// cache empty when it rejects.
#include <cstddef>
#include <cstdint>

#include "cache/cache.h"
#include "cache/cache_file.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    cache::Cache cache(cache::CacheConfig{.budget_bytes = 1 << 20, .shards = 1, .seed = 42});
    const auto result =
        cache::load_cache_bytes(cache, data, size, cache::TtlPolicy{}, fuzz::kNow, fuzz::kWallNow);
    if (!result) {
        fuzz::check(cache.counters().entries == 0);
        fuzz::check(!result.error().empty());
    }
    // The same seed: the same chains, so the same evictions.
    cache::Cache alone(cache::CacheConfig{.budget_bytes = 1 << 20, .shards = 1, .seed = 42});
    const auto one_pass =
        cache::load_cache_bytes(alone, data, size, cache::TtlPolicy{}, fuzz::kNow, fuzz::kWallNow,
                                cache::LoadOptions{.cache_is_private = true});
    fuzz::check(one_pass.ok() == result.ok());
    if (one_pass) {
        fuzz::check(one_pass.value() == result.value());
        fuzz::check(alone.counters().entries == cache.counters().entries);
    } else {
        fuzz::check(alone.counters().entries == 0);
    }
    return 0;
}
