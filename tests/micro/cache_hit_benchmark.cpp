// SPDX-License-Identifier: BSD-3-Clause
// Micro-benchmark of the hit path without the kernel: parse a query, look it up, render the
// answer, as a worker does for each cached query. With several threads on one shared cache it
// shows whether hits scale with cores (no global lock) on machines with more cores than the
// benchmark kit can spare for servers.
//   build/tests/cache_hit_benchmark --benchmark_min_time=2
#include <benchmark/benchmark.h>

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "dns/name.h"
#include "dns/query.h"
#include "dns/response.h"

namespace nscache {
namespace {

constexpr int kNames = 100'000;
constexpr uint64_t kNow = 1'000'000;

struct Fixture {
    cache::Cache cache{cache::CacheConfig{.budget_bytes = size_t{64} << 20}};
    std::vector<std::vector<uint8_t>> queries;

    Fixture() {
        for (int i = 0; i < kNames; ++i) {
            const std::string text = "host" + std::to_string(i) + ".example.test";
            const auto name = *dns::name_from_text(text);
            std::array<uint8_t, dns::kMaxUpstreamQuery> wire{};
            const size_t n = dns::write_upstream_query(
                dns::UpstreamQuestion{name.view(), dns::rtype::A, dns::kClassIN, false, false},
                static_cast<uint16_t>(i), 1232, wire);
            queries.emplace_back(wire.begin(), wire.begin() + static_cast<long>(n));
            cache::PreparedAnswer a;
            a.ancount = 1;
            a.ttl = 3600;
            a.records = {0xC0, 12, 0, 1, 0, 1, 0, 0, 0x0E, 0x10, 0, 4, 192, 0, 2, 1};
            a.ttl_offsets = {6};
            cache.insert(cache::CacheKey{name.view(), dns::rtype::A, dns::kClassIN, 0}, a, kNow);
        }
    }
};

Fixture& fixture() {
    static Fixture f;
    return f;
}

void BM_CacheHit(benchmark::State& state) {
    Fixture& f = fixture();
    std::array<uint8_t, 1232> out{};
    uint32_t x = static_cast<uint32_t>(state.thread_index()) * 7919u + 1;
    for (auto _ : state) {
        x = x * 1664525u + 1013904223u;
        const auto& wire = f.queries[x % kNames];
        const dns::ParsedQuery parsed = dns::parse_query(dns::Bytes(wire));
        dns::NameBuffer lower;
        dns::lower_name(parsed.query.qname, lower);
        const cache::CacheKey key{lower.view(), parsed.query.qtype, parsed.query.qclass, 0};
        const auto r = f.cache.lookup(key, parsed.query, kNow + 1000,
                                      cache::RenderLimits{1232, 1232}, out, false);
        benchmark::DoNotOptimize(r.length);
    }
    state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_CacheHit)->Threads(1)->Threads(2)->Threads(4)->UseRealTime();

}  // namespace
}  // namespace nscache

BENCHMARK_MAIN();
