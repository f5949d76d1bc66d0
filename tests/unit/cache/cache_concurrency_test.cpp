// SPDX-License-Identifier: BSD-3-Clause
// Several threads inserting, looking up and flushing at once: every hit must be a whole,
// correct answer for the name asked. Run under ThreadSanitizer in CI.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "cache/cache.h"
#include "cache_test_support.h"

namespace nscache::cache {
namespace {

using testing::ClientQuery;
using testing::positive_answer;
using testing::prepare;

TEST(CacheConcurrency, ParallelInsertLookupFlushServeWholeAnswers) {
    Cache cache(CacheConfig{.budget_bytes = 512 << 10, .shards = 4});
    constexpr int kNames = 2000;
    std::vector<std::unique_ptr<ClientQuery>> queries;
    std::vector<PreparedAnswer> answers;
    for (int i = 0; i < kNames; ++i) {
        const std::string name = "n" + std::to_string(i) + ".example.test";
        queries.push_back(std::make_unique<ClientQuery>(name, dns::rtype::A));
        answers.push_back(*prepare(positive_answer(name, {300}), TtlPolicy{}));
    }
    std::atomic<int> bad{0};
    std::atomic<int> hits{0};
    auto worker = [&](int seed) {
        std::array<uint8_t, 1024> out{};
        uint32_t x = static_cast<uint32_t>(seed) * 2654435761u + 1;
        for (int round = 0; round < 20000; ++round) {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            const int i = static_cast<int>(x % kNames);
            const ClientQuery& q = *queries[i];
            const CacheKey key{q.lower.view(), dns::rtype::A, 1, 0};
            if (x % 3 == 0) {
                cache.insert(key, answers[i], 1000 + round);
            } else if (x % 997 == 0) {
                cache.flush_name(q.lower.view());
            } else {
                auto r = cache.lookup(key, q.query(), 1000 + round, RenderLimits{}, out, false);
                if (r.freshness != Freshness::Fresh) continue;
                ++hits;
                const size_t records_at = 12 + q.query().question.size();
                if (r.length != records_at + answers[i].records.size() ||
                    !std::equal(answers[i].records.begin() + 12, answers[i].records.end(),
                                out.begin() + static_cast<long>(records_at) + 12)) {
                    ++bad;
                }
            }
        }
    };
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) threads.emplace_back(worker, t + 1);
    std::thread flusher([&] {
        for (int i = 0; i < 20; ++i) {
            cache.flush();
            std::this_thread::yield();
        }
    });
    for (auto& t : threads) t.join();
    flusher.join();
    EXPECT_EQ(bad.load(), 0);
    EXPECT_GT(hits.load(), 0);
    EXPECT_LE(cache.counters().bytes, 512u << 10);
}

}  // namespace
}  // namespace nscache::cache
