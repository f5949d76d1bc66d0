// SPDX-License-Identifier: BSD-3-Clause
// A whole Worker (its UDP socket, TCP listener, resolver and completion queue) on loopback
// sockets bound to port 0, its loop on a FakeClock, turned one step at a time: no sleeps.
#include "server/worker.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <string>

#include "../upstream/upstream_test_support.h"
#include "common/readiness.h"
#include "control/health.h"
#include "fake_clock.h"
#include "server_test_support.h"
#include "upstream/routing.h"

namespace nscache::server {
namespace {

using testing::loopback_client;
using testing::loopback_socket;
using testing::read_messages;
using testing::recv_now;
using testing::tcp_query;
using testing::WireBuilder;
using testing::write_all;
using upstream::testing::ManualUpstream;

std::vector<uint8_t> query(std::string_view name, uint16_t qtype, uint16_t id) {
    WireBuilder b;
    b.header(id, dns::flag::RD, 1).question(name, qtype);
    return b.bytes;
}

uint16_t id_of(const std::vector<uint8_t>& msg) {
    return dns::read_u16(msg.data());
}

Config worker_config(const ManualUpstream& upstream) {
    Config c = testing::test_config();
    c.upstreams = {upstream.address};
    c.forward_private_zones = true;  // the tests ask .test names
    return c;
}

struct WorkerHarness {
    explicit WorkerHarness(Config c = {}, bool configured = false)
        : config(configured ? std::move(c) : worker_config(upstream)),
          cache(cache::CacheConfig{.budget_bytes = size_t{4} << 20}),
          routing(upstream::Routing::build(config, registry)),
          settings(make_settings(config, routing, 4096)),
          resolver_shared{settings->resolver, cache, {}, {}},
          shared{config, cache, resolver_shared, {}},
          udp_fd(loopback_socket(SOCK_DGRAM, &udp_port)),
          tcp_fd(loopback_socket(SOCK_STREAM, &tcp_port)),
          worker(0, shared, counters, {udp_fd}, {tcp_fd}, settings, clock) {
        resolver_shared.queues.push_back(&worker.completion_queue());
        worker.start_listening();
    }

    // Turns the worker's loop until `done`, at most `turns` times (each returns as soon as an
    // event is ready: loopback traffic is there by the time send() returns).
    bool turn_until(const std::function<bool()>& done, int turns = 20) {
        for (int i = 0; i < turns; ++i) {
            if (done()) return true;
            worker.run_once(10);
        }
        return done();
    }
    void turns(int n) {
        for (int i = 0; i < n; ++i) worker.run_once(0);
    }

    void cache_a(std::string_view name) {
        auto answer = cache::testing::prepare(cache::testing::positive_answer(name, {300}),
                                              cache::TtlPolicy{});
        dns::NameBuffer lower;
        dns::lower_name(dns::name_from_text(name)->view(), lower);
        cache.insert(cache::CacheKey{lower.view(), dns::rtype::A, dns::kClassIN, 0}, *answer,
                     worker.loop().now_ms());
    }

    ManualUpstream upstream;
    Config config;
    cache::Cache cache;
    upstream::UpstreamRegistry registry;
    std::shared_ptr<const upstream::Routing> routing;
    SettingsPtr settings;
    upstream::ResolverShared resolver_shared;
    ServerShared shared;
    WorkerCounters counters;
    nscache::testing::FakeClock clock;
    uint16_t udp_port = 0;
    uint16_t tcp_port = 0;
    int udp_fd;
    int tcp_fd;
    Worker worker;  // owns udp_fd and tcp_fd
};

TEST(Worker, UdpQueryIsAnsweredFromAPrefilledCache) {
    WorkerHarness h;
    h.cache_a("www.example.test");
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("www.example.test", dns::rtype::A, 0x2121);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    std::optional<std::vector<uint8_t>> answer;
    ASSERT_TRUE(h.turn_until([&] { return (answer = recv_now(client)).has_value(); }));
    EXPECT_EQ(id_of(*answer), 0x2121);
    EXPECT_EQ(dns::read_u16(answer->data() + 6), 1u);  // ANCOUNT
    EXPECT_EQ(h.counters.cache_hits.load(), 1u);
    EXPECT_FALSE(h.upstream.take_udp().has_value()) << "a hit went upstream";
    close(client);
}

// A miss goes to the upstream; its answer comes back through the completion queue and the
// UDP socket's end-of-turn flush.
TEST(Worker, UdpMissIsAskedUpstreamAndItsAnswerRelayed) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("miss.example.test", dns::rtype::A, 0x3131);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    std::optional<ManualUpstream::Received> asked;
    ASSERT_TRUE(h.turn_until([&] { return (asked = h.upstream.take_udp()).has_value(); }));
    EXPECT_FALSE(recv_now(client).has_value()) << "answered before the upstream did";
    h.upstream.reply_udp(*asked, upstream::testing::answer_to(
                                     asked->msg, 0, 1, upstream::testing::a_record(300, 42)));
    std::optional<std::vector<uint8_t>> answer;
    ASSERT_TRUE(h.turn_until([&] { return (answer = recv_now(client)).has_value(); }));
    EXPECT_EQ(id_of(*answer), 0x3131);
    EXPECT_EQ((*answer)[answer->size() - 1], 42);  // the upstream's 192.0.2.42
    EXPECT_EQ(h.counters.cache_misses.load(), 1u);
    close(client);
}

// With the upstream silent, the query timeout is crossed by advancing the fake clock: the
// client gets SERVFAIL without the test waiting 2 s.
TEST(Worker, SilentUpstreamIsServfailAtTheQueryTimeout) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("silent.example.test", dns::rtype::A, 0x4141);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    ASSERT_TRUE(h.turn_until([&] { return h.upstream.take_udp().has_value(); }));
    std::optional<std::vector<uint8_t>> answer;
    for (int i = 0; i < 100 && !answer; ++i) {  // 5 s of fake time at most
        h.clock.advance_ms(50);
        h.turns(1);
        while (h.upstream.take_udp()) {
        }
        answer = recv_now(client);
    }
    ASSERT_TRUE(answer.has_value());
    EXPECT_EQ(id_of(*answer), 0x4141);
    EXPECT_EQ((*answer)[3] & 0x0F, static_cast<int>(dns::Rcode::ServFail));
    EXPECT_GE(h.counters.upstream_timeouts.load(), 1u);
    close(client);
}

TEST(Worker, MalformedUdpQueryIsFormErr) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    WireBuilder header_only;
    header_only.header(0x5151, dns::flag::RD, 1);
    ASSERT_EQ(send(client, header_only.bytes.data(), header_only.bytes.size(), 0),
              static_cast<ssize_t>(header_only.bytes.size()));
    std::optional<std::vector<uint8_t>> answer;
    ASSERT_TRUE(h.turn_until([&] { return (answer = recv_now(client)).has_value(); }));
    EXPECT_EQ(id_of(*answer), 0x5151);
    EXPECT_EQ((*answer)[3] & 0x0F, static_cast<int>(dns::Rcode::FormErr));
    close(client);
}

TEST(Worker, TcpQueryIsAcceptedAndAnswered) {
    WorkerHarness h;
    h.cache_a("www.example.test");
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    write_all(client, tcp_query("www.example.test", dns::rtype::A, 0x6161));
    std::vector<uint8_t> buffer;
    std::vector<std::vector<uint8_t>> answers;
    ASSERT_TRUE(h.turn_until([&] {
        for (auto& m : read_messages(client, buffer)) answers.push_back(std::move(m));
        return !answers.empty();
    }));
    EXPECT_EQ(id_of(answers[0]), 0x6161);
    EXPECT_EQ(h.counters.tcp_connections.load(), 1u);
    EXPECT_EQ(h.counters.tcp_rejected.load(), 0u);
    close(client);
}

// The TCP idle timeout, crossed by the fake clock: open before it, closed after.
TEST(Worker, IdleTcpConnectionIsClosedAtItsTimeout) {
    ManualUpstream upstream;
    Config c = worker_config(upstream);
    c.tcp_idle_timeout_ms = 1000;
    WorkerHarness h(c, true);
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_connections.load() == 1; }));
    bool eof = false;
    std::vector<uint8_t> buffer;
    h.clock.advance_ms(900);
    h.turns(2);
    read_messages(client, buffer, &eof);
    EXPECT_FALSE(eof) << "closed before its idle timeout";
    h.clock.advance_ms(200);
    ASSERT_TRUE(h.turn_until([&] {
        read_messages(client, buffer, &eof);
        return eof;
    }));
    close(client);
}

// max-tcp-connections: the connection over the cap is accepted and closed at once, and
// counted as refused; the one within it is served.
TEST(Worker, ConnectionOverTheAcceptCapIsClosedAndCounted) {
    ManualUpstream upstream;
    Config c = worker_config(upstream);
    c.max_tcp_connections = 1;
    WorkerHarness h(c, true);
    const int first = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_connections.load() == 1; }));
    const int second = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_rejected.load() == 1; }));
    bool eof = false;
    std::vector<uint8_t> buffer;
    ASSERT_TRUE(h.turn_until([&] {
        read_messages(second, buffer, &eof);
        return eof;
    }));
    EXPECT_EQ(h.counters.tcp_connections.load(), 1u);
    EXPECT_EQ(h.shared.tcp.connections.load(), 1u);
    bool first_eof = false;
    std::vector<uint8_t> first_buffer;
    read_messages(first, first_buffer, &first_eof);
    EXPECT_FALSE(first_eof);
    close(first);
    close(second);
}

// A client outside `allow` is closed at accept, before it costs a connection slot.
TEST(Worker, TcpClientOutsideAllowIsClosedAtAccept) {
    ManualUpstream upstream;
    Config c = worker_config(upstream);
    c.allow = {*parse_cidr("192.0.2.0/24")};
    WorkerHarness h(c, true);
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_rejected.load() == 1; }));
    EXPECT_EQ(h.counters.tcp_connections.load(), 0u);
    EXPECT_EQ(h.shared.tcp.connections.load(), 0u);
    bool eof = false;
    std::vector<uint8_t> buffer;
    read_messages(client, buffer, &eof);
    EXPECT_TRUE(eof);
    close(client);
}

// Settings posted from another thread are adopted at the next wake-up: here a reload that
// stops allowing loopback.
TEST(Worker, PostedSettingsAreAdoptedAtTheNextWakeUp) {
    WorkerHarness h;
    Config stricter = h.config;
    stricter.allow = {*parse_cidr("192.0.2.0/24")};
    h.worker.post_settings(make_settings(stricter, h.routing, 4096, h.settings.get()));
    h.turns(1);
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_rejected.load() == 1; }));
    EXPECT_EQ(h.counters.tcp_connections.load(), 0u);
    close(client);
}

// Drain (SIGTERM): a miss already read is answered with the upstream's data before the loop
// may stop, and a query sent after the drain began is not read (it stays queued).
TEST(WorkerDrain, PendingUpstreamQueryIsAnsweredBeforeTheWorkerIsDrained) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("miss.example.test", dns::rtype::A, 0x7171);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    std::optional<ManualUpstream::Received> asked;
    ASSERT_TRUE(h.turn_until([&] { return (asked = h.upstream.take_udp()).has_value(); }));
    h.worker.request_drain(h.worker.loop().now_ms() + 3000);
    h.turns(2);
    EXPECT_FALSE(h.worker.drained()) << "drained with a client still waiting";
    // Not read now: the listening socket left the loop.
    const auto late = query("www.example.test", dns::rtype::A, 0x7272);
    ASSERT_EQ(send(client, late.data(), late.size(), 0), static_cast<ssize_t>(late.size()));
    h.turns(2);
    EXPECT_FALSE(recv_now(client).has_value());
    h.upstream.reply_udp(*asked, upstream::testing::answer_to(
                                     asked->msg, 0, 1, upstream::testing::a_record(300, 42)));
    std::optional<std::vector<uint8_t>> answer;
    ASSERT_TRUE(h.turn_until([&] { return (answer = recv_now(client)).has_value(); }));
    EXPECT_EQ(id_of(*answer), 0x7171);
    EXPECT_EQ((*answer)[answer->size() - 1], 42);
    ASSERT_TRUE(h.turn_until([&] { return h.worker.drained(); }));
    EXPECT_FALSE(recv_now(client).has_value()) << "the query sent during the drain was read";
    // ...it is still queued in the socket, for whoever reads it next.
    char byte;
    EXPECT_GT(recv(h.udp_fd, &byte, 1, MSG_DONTWAIT | MSG_PEEK), 0);
    close(client);
}

TEST(WorkerDrain, TheDeadlineEndsADrainThatWouldWaitLonger) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("silent.example.test", dns::rtype::A, 0x7373);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    ASSERT_TRUE(h.turn_until([&] { return h.upstream.take_udp().has_value(); }));
    h.worker.request_drain(h.worker.loop().now_ms() + 500);
    h.turns(2);
    EXPECT_FALSE(h.worker.drained());
    h.clock.advance_ms(600);
    h.turns(1);
    EXPECT_TRUE(h.worker.drained());
    close(client);
}

// A worker done with its drain beats no more while others may drain on for query-timeout:
// /health must not call it stalled.
TEST(WorkerDrain, ADrainedWorkerIsNoStalledOneForHealth) {
    WorkerHarness h;
    h.counters.heartbeat_ms = h.clock.now_ms();  // as its last beat before the drain
    h.worker.request_drain(h.worker.loop().now_ms() + 3000);
    ASSERT_TRUE(h.turn_until([&] { return h.worker.drained(); }));
    h.clock.advance_ms(3 * kHeartbeatStaleMs);
    h.turns(1);
    const control::HealthSources sources{nullptr, std::span<const WorkerCounters>(&h.counters, 1)};
    EXPECT_EQ(control::liveness(sources, h.clock.now_ms()).body, "ok\n");
}

// Sockets this process bound itself, which no other process holds: the drain refuses new
// queries at once (ICMP port unreachable: the stub tries its next server now, not after its
// timeout; TCP: refused), while the miss already read is still answered through the socket.
TEST(WorkerDrain, PrivateSocketsRefuseNewQueriesAndStillAnswerTheMissInFlight) {
    WorkerHarness h;
    h.worker.set_private_listeners({h.udp_fd, h.tcp_fd});
    h.cache_a("www.example.test");
    const int client = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto q = query("miss.example.test", dns::rtype::A, 0x7575);
    ASSERT_EQ(send(client, q.data(), q.size(), 0), static_cast<ssize_t>(q.size()));
    std::optional<ManualUpstream::Received> asked;
    ASSERT_TRUE(h.turn_until([&] { return (asked = h.upstream.take_udp()).has_value(); }));
    // Queued as the drain begins: read and answered all the same.
    const int queued = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto hit = query("www.example.test", dns::rtype::A, 0x7676);
    ASSERT_EQ(send(queued, hit.data(), hit.size(), 0), static_cast<ssize_t>(hit.size()));
    h.worker.request_drain(h.worker.loop().now_ms() + 3000, /*refuse_private=*/true);
    std::optional<std::vector<uint8_t>> hit_answer;
    ASSERT_TRUE(h.turn_until([&] { return (hit_answer = recv_now(queued)).has_value(); }));
    EXPECT_EQ(id_of(*hit_answer), 0x7676);
    EXPECT_FALSE(h.worker.drained());

    const int late = loopback_client(SOCK_DGRAM, h.udp_port);
    const auto late_query = query("www.example.test", dns::rtype::A, 0x7777);
    ASSERT_EQ(send(late, late_query.data(), late_query.size(), 0),
              static_cast<ssize_t>(late_query.size()));
    char byte;
    EXPECT_EQ(recv(late, &byte, 1, MSG_DONTWAIT), -1);
    EXPECT_EQ(errno, ECONNREFUSED) << "a query sent during the drain was not refused";
    const int late_tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(h.tcp_port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_NE(connect(late_tcp, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(errno, ECONNREFUSED);

    h.upstream.reply_udp(*asked, upstream::testing::answer_to(
                                     asked->msg, 0, 1, upstream::testing::a_record(300, 42)));
    std::optional<std::vector<uint8_t>> answer;
    ASSERT_TRUE(h.turn_until([&] { return (answer = recv_now(client)).has_value(); }));
    EXPECT_EQ(id_of(*answer), 0x7575);
    EXPECT_EQ((*answer)[answer->size() - 1], 42);
    ASSERT_TRUE(h.turn_until([&] { return h.worker.drained(); }));
    for (int fd : {client, queued, late, late_tcp}) close(fd);
}

TEST(WorkerDrain, AnIdleWorkerIsDrainedAtOnceAndStopsAcceptingTcp) {
    WorkerHarness h;
    h.worker.request_drain(h.worker.loop().now_ms() + 3000);
    ASSERT_TRUE(h.turn_until([&] { return h.worker.drained(); }));
    // The listener left the loop: a connection waits in the backlog, never accepted here.
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    h.turns(3);
    EXPECT_EQ(h.counters.tcp_connections.load(), 0u);
    close(client);
}

// A TCP connection open at the drain: the query it had sent is answered, then it is shut down
// and closed once the client closes.
TEST(WorkerDrain, OpenTcpConnectionIsAnsweredThenClosed) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    write_all(client, tcp_query("miss.example.test", dns::rtype::A, 0x7474));
    std::optional<ManualUpstream::Received> asked;
    ASSERT_TRUE(h.turn_until([&] { return (asked = h.upstream.take_udp()).has_value(); }));
    h.worker.request_drain(h.worker.loop().now_ms() + 3000);
    h.turns(2);
    EXPECT_FALSE(h.worker.drained());
    h.upstream.reply_udp(*asked, upstream::testing::answer_to(
                                     asked->msg, 0, 1, upstream::testing::a_record(300, 42)));
    std::vector<uint8_t> buffer;
    std::vector<std::vector<uint8_t>> answers;
    ASSERT_TRUE(h.turn_until([&] {
        for (auto& m : read_messages(client, buffer)) answers.push_back(std::move(m));
        return !answers.empty();
    }));
    EXPECT_EQ(id_of(answers[0]), 0x7474);
    // The daemon's side is shut down after the answer; the drain waits for the client to
    // close (closing first, with a query unread, would reset the answer away).
    char byte;
    ASSERT_TRUE(h.turn_until([&] { return recv(client, &byte, 1, MSG_DONTWAIT) == 0; }))
        << "the connection was not shut down";
    h.turns(2);
    EXPECT_FALSE(h.worker.drained());
    close(client);
    ASSERT_TRUE(h.turn_until([&] { return h.worker.drained(); }));
}

// A client that keeps its connection open after the daemon's FIN holds the drain only until
// its deadline.
TEST(WorkerDrain, AClientThatNeverClosesHoldsTheDrainOnlyToItsDeadline) {
    WorkerHarness h;
    const int client = loopback_client(SOCK_STREAM, h.tcp_port);
    ASSERT_TRUE(h.turn_until([&] { return h.counters.tcp_connections.load() == 1; }));
    h.worker.request_drain(h.worker.loop().now_ms() + 500);
    char byte;
    ASSERT_TRUE(h.turn_until([&] { return recv(client, &byte, 1, MSG_DONTWAIT) == 0; }));
    h.turns(2);
    EXPECT_FALSE(h.worker.drained());
    h.clock.advance_ms(600);
    h.turns(1);
    EXPECT_TRUE(h.worker.drained());
    close(client);
}

}  // namespace
}  // namespace nscache::server
