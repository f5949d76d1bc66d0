// SPDX-License-Identifier: BSD-3-Clause
#include "control/health.h"

#include <gtest/gtest.h>

#include "control/http.h"

namespace nscache::control {
namespace {

TEST(Health, LivenessFollowsTheHeartbeats) {
    WorkerCounters loops[2];
    HealthSources sources{nullptr, loops};
    // Loops that have not run yet are no failure (the control thread may answer first).
    EXPECT_EQ(liveness(sources, 100'000).status, 200);
    loops[0].heartbeat_ms = 100'000;
    loops[1].heartbeat_ms = 100'000;
    EXPECT_EQ(liveness(sources, 100'000 + kHeartbeatStaleMs).status, 200);
    loops[0].heartbeat_ms = 100'000 + kHeartbeatStaleMs;  // worker 0 still beats, 1 does not
    const HealthReply stalled = liveness(sources, 100'001 + kHeartbeatStaleMs);
    EXPECT_EQ(stalled.status, 503);
    EXPECT_EQ(stalled.body, "worker 1 stalled for 5001 ms\n");
}

// A loop that finished its drain (the others may drain on) is no stalled one.
TEST(Health, AFinishedLoopIsNotStalled) {
    WorkerCounters loops[2];
    HealthSources sources{nullptr, loops};
    loops[0].heartbeat_ms = kHeartbeatFinished;
    loops[1].heartbeat_ms = 100'000;
    EXPECT_EQ(liveness(sources, 100'000 + kHeartbeatStaleMs).status, 200);
}

TEST(Health, ReadinessIsReadyAndLive) {
    WorkerCounters loops[1];
    Readiness state;
    HealthSources sources{&state, loops};
    EXPECT_EQ(readiness(sources, 1000).status, 503);
    EXPECT_EQ(readiness(sources, 1000).body, "starting\n");
    EXPECT_EQ(liveness(sources, 1000).status, 200);  // alive while starting
    state.set_ready();
    EXPECT_EQ(readiness(sources, 1000).status, 200);
    loops[0].heartbeat_ms = 1000;
    EXPECT_EQ(readiness(sources, 1000 + kHeartbeatStaleMs + 1).status, 503);  // wedged
    loops[0].heartbeat_ms = 9000;
    state.set_draining();
    EXPECT_EQ(readiness(sources, 9000).status, 503);
    EXPECT_EQ(readiness(sources, 9000).body, "draining\n");
    EXPECT_EQ(liveness(sources, 9000).status, 200);  // alive while draining
}

TEST(Http, RequestLine) {
    auto r = parse_request_line("GET /ready HTTP/1.1\r\nHost: x\r\n\r\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->method, "GET");
    EXPECT_EQ(r->path, "/ready");
    r = parse_request_line("HEAD /health?x=1 HTTP/1.0\n\n");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->method, "HEAD");
    EXPECT_EQ(r->path, "/health");
    for (const char* bad :
         {"", "GET /ready HTTP/1.1", "GET /ready\r\n", "GET  /ready HTTP/1.1\r\n",
          "GET ready HTTP/1.1\r\n", "get /ready HTTP/1.1\r\n", "GET /ready SPDY/3.1\r\n",
          " GET /ready HTTP/1.1\r\n", "GET /ready HTTP/1.1 extra\r\n"}) {
        EXPECT_FALSE(parse_request_line(bad)) << bad;
    }
}

TEST(Http, BoundsAndReplies) {
    HttpRequest request;
    // A head cut at the bound (no blank line within it) is refused whole.
    const std::string cut = "GET /health HTTP/1.1\r\nX: " + std::string(5000, 'a');
    auto error = check_request(cut, 4096, request);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->rfind("HTTP/1.0 431 ", 0), 0u) << *error;
    error = check_request("BREW /pot HTCPCP/1.0\r\n\r\n", 4096, request);
    ASSERT_TRUE(error);
    EXPECT_EQ(error->rfind("HTTP/1.0 400 ", 0), 0u);
    EXPECT_FALSE(check_request("GET /health HTTP/1.1\r\n\r\n", 4096, request));
    EXPECT_EQ(request.path, "/health");

    EXPECT_EQ(http_reply(200, "text/plain", "ok\n"),
              "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\n"
              "Connection: close\r\n\r\nok\n");
    EXPECT_EQ(http_reply(503, "text/plain", "draining\n", /*head_only=*/true),
              "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
              "Content-Length: 9\r\nConnection: close\r\n\r\n");
    EXPECT_NE(method_not_allowed().find("405 Method Not Allowed\r\n"), std::string::npos);
    EXPECT_NE(method_not_allowed().find("Allow: GET, HEAD\r\n"), std::string::npos);
}

}  // namespace
}  // namespace nscache::control
