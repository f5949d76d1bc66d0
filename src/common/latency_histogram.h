// SPDX-License-Identifier: BSD-3-Clause
// Answer latency as histograms, one per source of the answer (cache, upstream, stale): each
// worker keeps its own (single writer, relaxed atomics), and readers sum them when someone
// asks for stats, as with the counters of common/counters.h.
// Latency is measured on the worker's event-loop clock (one read per loop turn), from the turn
// that read the query to the turn that sent its answer.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <iterator>

namespace nscache {

// X(name, help). The order is the label order on every output.
#define NSCACHE_ANSWER_SOURCES(X)                                                        \
    X(cache, "a fresh cache entry, sent in the loop turn that read the query")           \
    X(upstream, "after asking upstream: its answer, or SERVFAIL when none came in time") \
    X(stale, "an expired entry (serve-stale), at once or after stale-answer-timeout")

enum class AnswerSource : uint8_t {
#define NSCACHE_SOURCE_ENUM(name, help) name,
    NSCACHE_ANSWER_SOURCES(NSCACHE_SOURCE_ENUM)
#undef NSCACHE_SOURCE_ENUM
};

inline constexpr const char* kAnswerSourceNames[] = {
#define NSCACHE_SOURCE_NAME(name, help) #name,
    NSCACHE_ANSWER_SOURCES(NSCACHE_SOURCE_NAME)
#undef NSCACHE_SOURCE_NAME
};
inline constexpr size_t kAnswerSources = std::size(kAnswerSourceNames);

// Bucket upper bounds in microseconds, about 2.5x apart: from 100 µs (a loopback upstream
// answers in about that) to 5 s (past query-timeout's default of 2 s). Prometheus' default
// buckets start at 5 ms, too coarse for a cache on the same host.
inline constexpr uint64_t kLatencyBoundsUs[] = {100,    250,    500,     1000,    2500,
                                                5000,   10000,  25000,   50000,   100000,
                                                250000, 500000, 1000000, 2500000, 5000000};
// One more bucket than bounds: the last counts everything above 5 s (+Inf).
inline constexpr size_t kLatencyBuckets = std::size(kLatencyBoundsUs) + 1;

// The bucket a latency falls in: the first whose bound is >= it (Prometheus' `le`).
constexpr size_t latency_bucket(uint64_t us) {
    size_t i = 0;
    while (i < std::size(kLatencyBoundsUs) && us > kLatencyBoundsUs[i]) ++i;
    return i;
}

// One worker's histogram for one source. Only the owning worker writes (a plain load and
// store, no locked instruction); any thread may read.
struct LatencyHistogram {
    std::atomic<uint64_t> buckets[kLatencyBuckets] = {};
    std::atomic<uint64_t> sum_us{0};

    void record(uint64_t us) {
        std::atomic<uint64_t>& b = buckets[latency_bucket(us)];
        b.store(b.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
        sum_us.store(sum_us.load(std::memory_order_relaxed) + us, std::memory_order_relaxed);
    }
};

// Histograms summed over workers, as readers see them. Buckets are per bucket here, not
// cumulative; the Prometheus output accumulates them.
struct LatencySnapshot {
    uint64_t buckets[kLatencyBuckets] = {};
    uint64_t sum_us = 0;

    void add(const LatencyHistogram& h) {
        for (size_t i = 0; i < kLatencyBuckets; ++i) {
            buckets[i] += h.buckets[i].load(std::memory_order_relaxed);
        }
        sum_us += h.sum_us.load(std::memory_order_relaxed);
    }
    uint64_t count() const {
        uint64_t n = 0;
        for (uint64_t b : buckets) n += b;
        return n;
    }
    // The upper bound (µs) of the bucket that holds quantile q (0 < q <= 1): the latency that
    // a fraction q of answers did not exceed, to the buckets' resolution. 0 with no answers;
    // UINT64_MAX when it lies past the last bound.
    uint64_t quantile_bound_us(double q) const {
        const uint64_t n = count();
        if (n == 0) return 0;
        // The rank of the answer at quantile q, rounded up: q = 0.5 of 3 answers is the 2nd.
        const double wanted = q * static_cast<double>(n);
        uint64_t rank = static_cast<uint64_t>(wanted);
        if (static_cast<double>(rank) < wanted || rank == 0) ++rank;
        uint64_t seen = 0;
        for (size_t i = 0; i < std::size(kLatencyBoundsUs); ++i) {
            seen += buckets[i];
            if (seen >= rank) return kLatencyBoundsUs[i];
        }
        return UINT64_MAX;
    }
};

}  // namespace nscache
