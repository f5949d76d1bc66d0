// SPDX-License-Identifier: BSD-3-Clause
#include "control/stats.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

namespace nscache::control {
namespace {

std::vector<SocketAddress> addresses(std::initializer_list<const char*> texts) {
    std::vector<SocketAddress> out;
    for (const char* t : texts) out.push_back(*parse_socket_address(t, 53));
    return out;
}

constexpr size_t kCache = static_cast<size_t>(AnswerSource::cache);
constexpr size_t kUpstream = static_cast<size_t>(AnswerSource::upstream);
constexpr size_t kStale = static_cast<size_t>(AnswerSource::stale);

// Two workers, one set of two upstream servers, a forwarding rule of one.
struct StatsFixture : ::testing::Test {
    WorkerCounters workers[2];
    upstream::UpstreamSet defaults{addresses({"127.0.0.1:5300", "[::1]:5300"})};
    upstream::UpstreamSet corp{addresses({"10.0.0.53"})};

    StatsSources sources() {
        StatsSources s;
        s.workers = std::span<const WorkerCounters>(workers, 2);
        auto d = std::shared_ptr<const upstream::UpstreamSet>(&defaults, [](auto*) {});
        auto c = std::shared_ptr<const upstream::UpstreamSet>(&corp, [](auto*) {});
        s.upstream_groups = [d, c] {
            return std::vector<UpstreamGroupSource>{{".", d}, {"corp.example,\"odd\"", c}};
        };
        return s;
    }

    void fill() {
        workers[0].cache_hits = 5;
        workers[1].cache_hits = 2;
        workers[0].latency[kUpstream].record(800);    // le 0.001
        workers[1].latency[kUpstream].record(30000);  // le 0.05
        workers[1].latency[kStale].record(0);
        defaults.counters().questions = 4;
        defaults.counters().failures = 1;
        defaults.at(0).queries = 3;
        defaults.at(0).answers = 3;
        defaults.at(0).errors = 1;
        defaults.at(0).srtt_us = 1500;
        defaults.at(1).queries = 2;
        defaults.at(1).timeouts = 2;
        defaults.at(1).down = true;
        corp.counters().questions = 9;
        corp.at(0).queries = 9;
        corp.at(0).answers = 9;
    }
};

TEST_F(StatsFixture, CollectSumsWorkersAndCountsHitsAtZeroLatency) {
    fill();
    const StatsSnapshot s = collect_stats(sources(), 0);
    EXPECT_EQ(s.cache_hits, 7u);
    // The hit path writes no bucket: the hit counter is the cache's first bucket.
    EXPECT_EQ(workers[0].latency[kCache].buckets[0].load(), 0u);
    EXPECT_EQ(s.latency[kCache].count(), 7u);
    EXPECT_EQ(s.latency[kCache].buckets[0], 7u);
    EXPECT_EQ(s.latency[kCache].sum_us, 0u);
    EXPECT_EQ(s.latency[kUpstream].count(), 2u);
    EXPECT_EQ(s.latency[kUpstream].sum_us, 30800u);
    EXPECT_EQ(s.latency[kStale].count(), 1u);
}

TEST_F(StatsFixture, CollectReadsEveryGroupAndServer) {
    fill();
    const StatsSnapshot s = collect_stats(sources(), 0);
    ASSERT_EQ(s.upstream_groups.size(), 2u);
    const UpstreamGroupStats& d = s.upstream_groups[0];
    EXPECT_EQ(d.name, ".");
    EXPECT_EQ(d.questions, 4u);
    EXPECT_EQ(d.failures, 1u);
    ASSERT_EQ(d.servers.size(), 2u);
    EXPECT_EQ(d.servers[0].address, "127.0.0.1:5300");
    EXPECT_EQ(d.servers[0].queries, 3u);
    EXPECT_EQ(d.servers[0].answers, 3u);
    EXPECT_EQ(d.servers[0].errors, 1u);
    EXPECT_DOUBLE_EQ(d.servers[0].srtt_ms, 1.5);
    EXPECT_TRUE(d.servers[0].up);
    EXPECT_EQ(d.servers[1].timeouts, 2u);
    EXPECT_FALSE(d.servers[1].up);
    EXPECT_EQ(s.upstream_groups[1].servers.at(0).queries, 9u);
}

TEST_F(StatsFixture, SingleGroupIsTheDefaultSetNamedDot) {
    StatsSources src;
    src.upstream_groups = single_upstream_group(defaults);
    const StatsSnapshot s = collect_stats(src, 0);
    ASSERT_EQ(s.upstream_groups.size(), 1u);
    EXPECT_EQ(s.upstream_groups[0].name, ".");
    EXPECT_EQ(s.upstream_groups[0].servers.size(), 2u);
}

// name{labels} -> value, for every sample line; every line must be a comment or a sample.
std::map<std::string, std::string> samples(const std::string& text) {
    static const std::regex sample(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*(\{.*\})?) ([-+0-9.eEInfNa]+)$)");
    std::map<std::string, std::string> out;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) continue;
        std::smatch m;
        EXPECT_TRUE(std::regex_match(line, m, sample)) << line;
        if (!m.empty()) {
            EXPECT_TRUE(out.emplace(m[1], m[3]).second) << "twice: " << line;
        }
    }
    return out;
}

TEST_F(StatsFixture, PrometheusDeclaresEachFamilyOnceWithItsType) {
    fill();
    const std::string text = format_prometheus(collect_stats(sources(), 0));
    std::set<std::string> families;
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("# TYPE ", 0) != 0) continue;
        std::istringstream words(line.substr(7));
        std::string name, type;
        words >> name >> type;
        EXPECT_TRUE(families.insert(name).second) << "declared twice: " << name;
        const bool total = name.size() > 6 && name.compare(name.size() - 6, 6, "_total") == 0;
        EXPECT_EQ(total, type == "counter") << line;  // counters and only counters end in _total
    }
    EXPECT_TRUE(families.count("nscache_answer_latency_seconds"));
    EXPECT_NE(text.find("# TYPE nscache_answer_latency_seconds histogram"), std::string::npos);
    samples(text);
}

// Levels (NSCACHE_WORKER_GAUGES) are summed over the blocks like counters (only their owner's
// block is not 0) and exposed as gauges, never as _total counters.
TEST_F(StatsFixture, GaugesAreLevelsInEveryFormat) {
    set_level(workers[1].nscd_refresh_timers, 7);
    set_level(workers[1].nscd_map_records, 9);
    const StatsSnapshot s = collect_stats(sources(), 0);
    EXPECT_EQ(s.nscd_refresh_timers, 7u);
    const std::string prom = format_prometheus(s);
    EXPECT_NE(
        prom.find("# TYPE nscache_nscd_refresh_timers gauge\nnscache_nscd_refresh_timers 7\n"),
        std::string::npos)
        << prom;
    EXPECT_NE(prom.find("nscache_nscd_map_records 9\n"), std::string::npos);
    EXPECT_NE(format_json(s).find("\"nscd_refresh_timers\": 7"), std::string::npos);
    EXPECT_NE(format_text(s).find("nscd_map_records 9\n"), std::string::npos);
}

// The text names each nscd database's plan; JSON and Prometheus keep its code.
TEST_F(StatsFixture, TextNamesTheNscdPlans) {
    set_level(workers[0].nscd_passwd_plan, 3);
    set_level(workers[0].nscd_group_plan, 1);
    const StatsSnapshot s = collect_stats(sources(), 0);
    const std::string text = format_text(s);
    EXPECT_NE(text.find("nscd_passwd_plan files_then_modules\n"), std::string::npos) << text;
    EXPECT_NE(text.find("nscd_group_plan proxy\n"), std::string::npos) << text;
    EXPECT_NE(text.find("nscd_services_plan decline\n"), std::string::npos) << text;
    EXPECT_NE(text.find("nscd_passwd_map_records 0\n"), std::string::npos) << text;
    EXPECT_NE(format_json(s).find("\"nscd_passwd_plan\": 3"), std::string::npos);
    EXPECT_NE(format_prometheus(s).find("nscache_nscd_passwd_plan 3\n"), std::string::npos);
}

TEST_F(StatsFixture, PrometheusHistogramIsCumulativeBySource) {
    fill();
    const auto m = samples(format_prometheus(collect_stats(sources(), 0)));
    const std::string up = "nscache_answer_latency_seconds_bucket{source=\"upstream\",le=";
    EXPECT_EQ(m.at(up + "\"0.0001\"}"), "0");
    EXPECT_EQ(m.at(up + "\"0.0005\"}"), "0");
    EXPECT_EQ(m.at(up + "\"0.001\"}"), "1");
    EXPECT_EQ(m.at(up + "\"0.025\"}"), "1");
    EXPECT_EQ(m.at(up + "\"0.05\"}"), "2");
    EXPECT_EQ(m.at(up + "\"5\"}"), "2");
    EXPECT_EQ(m.at(up + "\"+Inf\"}"), "2");
    EXPECT_EQ(m.at("nscache_answer_latency_seconds_count{source=\"upstream\"}"), "2");
    EXPECT_EQ(m.at("nscache_answer_latency_seconds_sum{source=\"upstream\"}"), "0.030800");
    EXPECT_EQ(m.at("nscache_answer_latency_seconds_bucket{source=\"cache\",le=\"0.0001\"}"), "7");
    EXPECT_EQ(m.at("nscache_answer_latency_seconds_count{source=\"cache\"}"), "7");
    EXPECT_EQ(m.at("nscache_answer_latency_seconds_count{source=\"stale\"}"), "1");
    EXPECT_EQ(m.at("nscache_cache_hits_total"), "7");
}

TEST_F(StatsFixture, PrometheusLabelsEachGroupAndServer) {
    fill();
    const auto m = samples(format_prometheus(collect_stats(sources(), 0)));
    EXPECT_EQ(m.at("nscache_forward_questions_total{forward=\".\"}"), "4");
    EXPECT_EQ(m.at("nscache_forward_failures_total{forward=\".\"}"), "1");
    // A quote in a label value is escaped.
    EXPECT_EQ(m.at("nscache_forward_questions_total{forward=\"corp.example,\\\"odd\\\"\"}"), "9");
    const std::string a = "{forward=\".\",upstream=\"127.0.0.1:5300\"}";
    const std::string b = "{forward=\".\",upstream=\"[::1]:5300\"}";
    EXPECT_EQ(m.at("nscache_upstream_server_queries_total" + a), "3");
    EXPECT_EQ(m.at("nscache_upstream_server_answers_total" + a), "3");
    EXPECT_EQ(m.at("nscache_upstream_server_errors_total" + a), "1");
    EXPECT_EQ(m.at("nscache_upstream_server_timeouts_total" + b), "2");
    EXPECT_EQ(m.at("nscache_upstream_server_srtt_seconds" + a), "0.001500");
    EXPECT_EQ(m.at("nscache_upstream_server_up" + a), "1");
    EXPECT_EQ(m.at("nscache_upstream_server_up" + b), "0");
}

TEST_F(StatsFixture, TextHasLatencyForwardAndUpstreamLines) {
    fill();
    const std::string text = format_text(collect_stats(sources(), 0));
    EXPECT_NE(text.find("\nlatency_cache count=7 mean_ms=0.0000 p50_ms=0.1000 p99_ms=0.1000\n"),
              std::string::npos)
        << text;
    EXPECT_NE(
        text.find("\nlatency_upstream count=2 mean_ms=15.4000 p50_ms=1.0000 p99_ms=50.0000\n"),
        std::string::npos)
        << text;
    EXPECT_NE(text.find("\nforward . questions=4 failures=1\n"), std::string::npos) << text;
    EXPECT_NE(text.find("\nupstream [::1]:5300 forward=. srtt_ms=0.0000 queries=2 answers=0 "
                        "errors=0 timeouts=2 down\n"),
              std::string::npos)
        << text;
    // Every line is `name value...`.
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) EXPECT_NE(line.find(' '), std::string::npos) << line;
}

TEST_F(StatsFixture, JsonHasGroupsServersAndHistograms) {
    fill();
    const std::string json = format_json(collect_stats(sources(), 0));
    EXPECT_NE(json.find("\"forwards\": [{\"name\": \".\", \"questions\": 4, \"failures\": 1}, "
                        "{\"name\": \"corp.example,\\\"odd\\\"\", \"questions\": 9, "
                        "\"failures\": 0}]"),
              std::string::npos)
        << json;
    EXPECT_NE(json.find("{\"address\": \"127.0.0.1:5300\", \"forward\": \".\", \"srtt_ms\": "
                        "1.5000, \"queries\": 3, \"answers\": 3, \"errors\": 1, \"timeouts\": 0, "
                        "\"up\": true}"),
              std::string::npos)
        << json;
    EXPECT_NE(json.find("\"stale\": {\"count\": 1, \"sum_us\": 0, \"buckets\": [1, 0,"),
              std::string::npos)
        << json;
    EXPECT_NE(json.find("\"latency_bucket_bounds_us\": [100, 250, 500,"), std::string::npos);
}

}  // namespace
}  // namespace nscache::control
