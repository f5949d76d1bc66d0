// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/miss_path.h"

#include <gtest/gtest.h>

#include <vector>

namespace nscache::upstream {
namespace {

struct ScriptedForwarder final : Forwarder {
    bool down = false;
    bool fail = false;
    std::vector<std::string> calls;  // in order

    bool resolve(const Question&, uint64_t) override { return true; }
    bool resolve_local(const Question&, uint64_t) override { return false; }
    void refresh(const Question&) override { calls.push_back("refresh"); }
    void leave(const Question&, uint64_t) override {}
    bool all_upstreams_down(const Question&) const override { return down; }
    bool failing(const Question&, FailureReason* reason) override {
        calls.push_back("failing");
        if (fail) *reason = FailureReason::NetworkError;
        return fail;
    }
};

struct Answers {
    bool stale = true;  // a stale entry is still there
    bool cut = false;   // a cached NXDOMAIN above the name
    std::vector<std::string> used;
    auto serve_stale() {
        return [this] {
            used.push_back("stale");
            return stale;
        };
    }
    auto nxdomain_cut() {
        return [this] {
            used.push_back("cut");
            return cut;
        };
    }
};

using Kind = MissDecision::Kind;

TEST(MissPath, PrefetchOnlyWhenDueAndOn) {
    ScriptedForwarder f;
    const Question q{};
    EXPECT_FALSE(on_hit(f, q, false, true));
    EXPECT_FALSE(on_hit(f, q, true, false));
    EXPECT_TRUE(on_hit(f, q, true, true));
    EXPECT_EQ(f.calls, std::vector<std::string>{"refresh"});
}

TEST(MissPath, NothingKnownIsAsked) {
    ScriptedForwarder f;
    Answers a;
    const MissDecision d =
        decide_miss(f, Question{}, false, false, a.serve_stale(), a.nxdomain_cut());
    EXPECT_EQ(d.kind, Kind::Ask);
    EXPECT_FALSE(d.failure_cached);
    EXPECT_EQ(a.used, std::vector<std::string>{"cut"});
}

TEST(MissPath, StaleAtOnceWhenEveryUpstreamIsDownOrWithServeExpired) {
    for (const bool serve_expired : {false, true}) {
        ScriptedForwarder f;
        f.down = !serve_expired;
        Answers a;
        const MissDecision d =
            decide_miss(f, Question{}, true, serve_expired, a.serve_stale(), a.nxdomain_cut());
        EXPECT_EQ(d.kind, Kind::Answered);
        EXPECT_EQ(a.used, std::vector<std::string>{"stale"});
        EXPECT_EQ(f.calls, std::vector<std::string>{"refresh"});  // refreshed in the background
    }
}

TEST(MissPath, TheCutComesBeforeTheFailureCache) {
    ScriptedForwarder f;
    f.fail = true;
    Answers a;
    a.cut = true;
    const MissDecision d =
        decide_miss(f, Question{}, false, false, a.serve_stale(), a.nxdomain_cut());
    EXPECT_EQ(d.kind, Kind::Answered);
    EXPECT_TRUE(f.calls.empty());
}

TEST(MissPath, FailureCacheFailsUnlessAStaleEntryAnswers) {
    ScriptedForwarder f;
    f.fail = true;
    Answers a;
    MissDecision d = decide_miss(f, Question{}, true, false, a.serve_stale(), a.nxdomain_cut());
    EXPECT_EQ(d.kind, Kind::Answered);  // serve-stale takes precedence
    EXPECT_TRUE(d.failure_cached);
    a.stale = false;  // gone meanwhile
    d = decide_miss(f, Question{}, true, false, a.serve_stale(), a.nxdomain_cut());
    EXPECT_EQ(d.kind, Kind::Failing);
    EXPECT_EQ(d.reason, FailureReason::NetworkError);
    d = decide_miss(f, Question{}, false, false, a.serve_stale(), a.nxdomain_cut());
    EXPECT_EQ(d.kind, Kind::Failing);
}

}  // namespace
}  // namespace nscache::upstream
