// SPDX-License-Identifier: BSD-3-Clause
#include "common/latency_histogram.h"

#include <gtest/gtest.h>

namespace nscache {
namespace {

TEST(LatencyHistogram, BucketIsTheFirstWhoseBoundIsNotBelow) {
    EXPECT_EQ(latency_bucket(0), 0u);
    EXPECT_EQ(latency_bucket(100), 0u);  // `le`: a bound holds latencies equal to it
    EXPECT_EQ(latency_bucket(101), 1u);
    EXPECT_EQ(latency_bucket(1000), 3u);
    EXPECT_EQ(latency_bucket(5'000'000), kLatencyBuckets - 2);
    EXPECT_EQ(latency_bucket(5'000'001), kLatencyBuckets - 1);  // +Inf
    EXPECT_EQ(latency_bucket(UINT64_MAX), kLatencyBuckets - 1);
}

TEST(LatencyHistogram, BoundsRiseStrictly) {
    for (size_t i = 1; i < std::size(kLatencyBoundsUs); ++i) {
        EXPECT_LT(kLatencyBoundsUs[i - 1], kLatencyBoundsUs[i]);
    }
}

TEST(LatencyHistogram, RecordCountsTheBucketAndTheSum) {
    LatencyHistogram h;
    h.record(50);
    h.record(300);
    h.record(300);
    h.record(9'000'000);
    EXPECT_EQ(h.buckets[0].load(), 1u);
    EXPECT_EQ(h.buckets[2].load(), 2u);  // (250, 500]
    EXPECT_EQ(h.buckets[kLatencyBuckets - 1].load(), 1u);
    EXPECT_EQ(h.sum_us.load(), 50u + 300 + 300 + 9'000'000);
}

TEST(LatencyHistogram, SnapshotSumsWorkers) {
    LatencyHistogram a, b;
    a.record(10);
    b.record(10);
    b.record(2000);
    LatencySnapshot s;
    s.add(a);
    s.add(b);
    EXPECT_EQ(s.count(), 3u);
    EXPECT_EQ(s.buckets[0], 2u);
    EXPECT_EQ(s.buckets[latency_bucket(2000)], 1u);
    EXPECT_EQ(s.sum_us, 2020u);
}

TEST(LatencyHistogram, QuantileIsTheBoundOfItsBucket) {
    LatencySnapshot s;
    EXPECT_EQ(s.quantile_bound_us(0.5), 0u);  // no answers yet
    s.buckets[0] = 1;                         // <= 100 µs
    s.buckets[3] = 1;                         // (500, 1000] µs
    s.buckets[6] = 2;                         // (5, 10] ms
    EXPECT_EQ(s.quantile_bound_us(0.25), 100u);
    EXPECT_EQ(s.quantile_bound_us(0.5), 1000u);  // the 2nd of 4
    EXPECT_EQ(s.quantile_bound_us(0.51), 10000u);
    EXPECT_EQ(s.quantile_bound_us(1.0), 10000u);
    s.buckets[kLatencyBuckets - 1] = 96;  // now nearly all past the last bound
    EXPECT_EQ(s.quantile_bound_us(0.99), UINT64_MAX);
    EXPECT_EQ(s.quantile_bound_us(0.01), 100u);
}

}  // namespace
}  // namespace nscache
