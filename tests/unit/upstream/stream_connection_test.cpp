// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/stream_connection.h"
#include "upstream/stream_pool.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>

#include "upstream_test_support.h"

namespace nscache::upstream {
namespace {

using testing::a_record;
using testing::answer_to;
using testing::ResolverHarness;

struct RecordingWaiter final : StreamConnection::Waiter {
    std::vector<std::vector<uint8_t>> answers;
    int failures = 0;
    void on_stream_answer(dns::Bytes msg, uint32_t) override {
        answers.emplace_back(msg.begin(), msg.end());
    }
    void on_stream_failed() override { ++failures; }
    void on_stream_refused() override { ++failures; }
};

struct StreamFixture {
    EventLoop loop;
    WorkerCounters counters;
    testing::ManualUpstream server;
    StreamConnection connection{loop,    counters,  server.address,
                                nullptr, TlsPeer{}, StreamOptions{.idle_timeout_ms = 60'000}};

    template <typename Done>
    bool run_until(Done&& done) {
        for (int i = 0; i < 400; ++i) {
            if (done()) return true;
            loop.run_once(5);
        }
        return false;
    }
};

// Reads framed messages from `fd` until `count` have arrived.
std::vector<std::vector<uint8_t>> read_frames(StreamFixture& f, int fd, size_t count) {
    std::vector<uint8_t> buf;
    std::vector<std::vector<uint8_t>> frames;
    f.run_until([&] {
        uint8_t chunk[4096];
        const ssize_t n = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) buf.insert(buf.end(), chunk, chunk + n);
        while (buf.size() >= 2 && buf.size() >= 2u + dns::read_u16(buf.data())) {
            const size_t len = dns::read_u16(buf.data());
            frames.emplace_back(buf.begin() + 2, buf.begin() + 2 + static_cast<long>(len));
            buf.erase(buf.begin(), buf.begin() + 2 + static_cast<long>(len));
        }
        return frames.size() >= count;
    });
    return frames;
}

void send_frame(int fd, const std::vector<uint8_t>& msg) {
    std::vector<uint8_t> out(2);
    dns::write_u16(out.data(), static_cast<uint16_t>(msg.size()));
    out.insert(out.end(), msg.begin(), msg.end());
    ASSERT_EQ(send(fd, out.data(), out.size(), MSG_NOSIGNAL), static_cast<ssize_t>(out.size()));
}

TEST(StreamConnection, PipelinedQueriesAnsweredOutOfOrder) {
    StreamFixture f;
    std::vector<Question> questions;
    for (int i = 0; i < 5; ++i) {
        questions.push_back(ResolverHarness::question("q" + std::to_string(i) + ".example.test"));
    }
    RecordingWaiter waiters[5];
    std::map<uint16_t, int> by_id;
    for (int i = 0; i < 5; ++i) {
        uint16_t id;
        ASSERT_TRUE(f.connection.send(questions[static_cast<size_t>(i)].wire(), &waiters[i], id));
        EXPECT_EQ(by_id.count(id), 0u) << "two queries on one connection share an ID";
        by_id[id] = i;
    }
    int conn = -1;
    ASSERT_TRUE(f.run_until([&] { return (conn = f.server.accept_tcp()) >= 0; }));
    auto frames = read_frames(f, conn, 5);
    ASSERT_EQ(frames.size(), 5u);
    // Answer last first; each carries its own address.
    for (size_t k = frames.size(); k-- > 0;) {
        const int i = by_id[dns::read_u16(frames[k].data())];
        send_frame(conn, answer_to(frames[k], 0, 1, a_record(300, static_cast<uint8_t>(i))));
    }
    ASSERT_TRUE(f.run_until([&] {
        for (auto& w : waiters)
            if (w.answers.empty()) return false;
        return true;
    }));
    for (int i = 0; i < 5; ++i) {
        ASSERT_EQ(waiters[i].answers.size(), 1u);
        EXPECT_EQ(waiters[i].answers[0].back(), i);  // the A record's last octet
        EXPECT_EQ(waiters[i].failures, 0);
    }
    EXPECT_EQ(f.counters.upstream_connections.load(), 1u);
    close(conn);
}

TEST(StreamConnection, ServerCloseTellsEveryWaiterAndTheNextQueryReconnects) {
    StreamFixture f;
    const Question q = ResolverHarness::question("a.example.test");
    RecordingWaiter w1, w2;
    uint16_t id;
    ASSERT_TRUE(f.connection.send(q.wire(), &w1, id));
    ASSERT_TRUE(f.connection.send(q.wire(), &w2, id));
    int conn = -1;
    ASSERT_TRUE(f.run_until([&] { return (conn = f.server.accept_tcp()) >= 0; }));
    read_frames(f, conn, 2);
    close(conn);
    ASSERT_TRUE(f.run_until([&] { return w1.failures == 1 && w2.failures == 1; }));
    EXPECT_FALSE(f.connection.backing_off());  // it was open: reconnect at once
    RecordingWaiter w3;
    ASSERT_TRUE(f.connection.send(q.wire(), &w3, id));
    ASSERT_TRUE(f.run_until([&] { return (conn = f.server.accept_tcp()) >= 0; }));
    auto frames = read_frames(f, conn, 1);
    ASSERT_EQ(frames.size(), 1u);
    send_frame(conn, answer_to(frames[0], 0, 1, a_record(300, 7)));
    ASSERT_TRUE(f.run_until([&] { return !w3.answers.empty(); }));
    EXPECT_EQ(f.counters.upstream_connections.load(), 2u);
    close(conn);
}

TEST(StreamConnection, RefusedConnectBacksOffAndQueriesWait) {
    StreamFixture f;
    close(f.server.tcp);  // nothing listens: connect is refused
    f.server.tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const Question q = ResolverHarness::question("a.example.test");
    RecordingWaiter w1;
    uint16_t id;
    ASSERT_TRUE(f.connection.send(q.wire(), &w1, id));
    EXPECT_EQ(w1.failures, 0);  // never from inside send()
    ASSERT_TRUE(f.run_until([&] { return w1.failures == 1; }));
    EXPECT_TRUE(f.connection.backing_off());
    EXPECT_EQ(f.counters.upstream_connect_failures.load(), 1u);
    RecordingWaiter w2;
    ASSERT_TRUE(f.connection.send(q.wire(), &w2, id));  // waits for the backoff, then fails
    ASSERT_TRUE(f.run_until([&] { return w2.failures == 1; }));
    EXPECT_EQ(f.counters.upstream_connect_failures.load(), 2u);
}

TEST(StreamConnection, AnswerToAnotherQuestionResetsTheConnection) {
    StreamFixture f;
    const Question q = ResolverHarness::question("a.example.test");
    const Question other = ResolverHarness::question("b.example.test");
    RecordingWaiter w;
    uint16_t id;
    ASSERT_TRUE(f.connection.send(q.wire(), &w, id));
    int conn = -1;
    ASSERT_TRUE(f.run_until([&] { return (conn = f.server.accept_tcp()) >= 0; }));
    auto frames = read_frames(f, conn, 1);
    ASSERT_EQ(frames.size(), 1u);
    // The right ID with someone else's question.
    std::vector<uint8_t> wrong(dns::kMaxUpstreamQuery);
    wrong.resize(dns::write_upstream_query(other.wire(), id, 1232, wrong));
    send_frame(conn, answer_to(wrong, 0, 1, a_record(300, 1)));
    ASSERT_TRUE(f.run_until([&] { return w.failures == 1; }));
    EXPECT_TRUE(w.answers.empty());
    EXPECT_EQ(f.counters.dropped_mismatched.load(), 1u);
    close(conn);
}

// Issue 16 item 2: a query that gives up keeps its ID quarantined (a late answer must not
// reach a later query), but 1,100 of them must not make the connection refuse new queries.
TEST(StreamConnection, AbandonedQueriesNeverMakeItRefuseNewOnes) {
    StreamFixture f;
    const Question q = ResolverHarness::question("lost.example.test");
    RecordingWaiter gave_up;
    int accepted = 0;
    for (int i = 0; i < 1100; ++i) {
        uint16_t id;
        if (!f.connection.send(q.wire(), &gave_up, id)) continue;
        ++accepted;
        f.connection.cancel(id, &gave_up);
        if (i % 64 == 0) f.loop.run_once(0);
    }
    EXPECT_EQ(accepted, 1100);
    const Question fresh_q = ResolverHarness::question("fresh.example.test");
    RecordingWaiter fresh;
    uint16_t fresh_id = 0;
    ASSERT_TRUE(f.connection.send(fresh_q.wire(), &fresh, fresh_id));
    // Answer every query that reaches the server, on whichever connection it came.
    std::vector<int> conns;
    std::map<int, std::vector<uint8_t>> bufs;
    ASSERT_TRUE(f.run_until([&] {
        for (int c; (c = f.server.accept_tcp()) >= 0;) conns.push_back(c);
        for (int c : conns) {
            uint8_t chunk[8192];
            const ssize_t n = recv(c, chunk, sizeof chunk, MSG_DONTWAIT);
            if (n <= 0) continue;
            auto& buf = bufs[c];
            buf.insert(buf.end(), chunk, chunk + n);
            while (buf.size() >= 2 && buf.size() >= 2u + dns::read_u16(buf.data())) {
                const size_t len = dns::read_u16(buf.data());
                const std::vector<uint8_t> frame(buf.begin() + 2,
                                                 buf.begin() + 2 + static_cast<long>(len));
                buf.erase(buf.begin(), buf.begin() + 2 + static_cast<long>(len));
                // Late answers: a socket that drained may be closed already.
                const auto msg = answer_to(frame, 0, 1, a_record(300, 9));
                std::vector<uint8_t> out(2);
                dns::write_u16(out.data(), static_cast<uint16_t>(msg.size()));
                out.insert(out.end(), msg.begin(), msg.end());
                (void)send(c, out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
            }
        }
        return !fresh.answers.empty();
    }));
    EXPECT_EQ(fresh.answers.size(), 1u);
    EXPECT_EQ(fresh.failures, 0);
    EXPECT_TRUE(gave_up.answers.empty()) << "an answer reached a query that had given up";
    EXPECT_EQ(gave_up.failures, 0);
    EXPECT_EQ(f.counters.upstream_stream_abandoned.load(), 1100u);
    for (int c : conns) close(c);
}

// The socket a query gave up on keeps its ID until it closes: a late answer there is
// recognised (not a mismatch, not delivered); the queries still live on it are answered on it;
// new queries go on a fresh socket, and the old one closes when nothing waits on it.
TEST(StreamConnection, DrainingSocketDropsLateAnswersAndAnswersItsLiveQueries) {
    StreamFixture f;
    const Question live_q = ResolverHarness::question("live.example.test");
    RecordingWaiter live;
    uint16_t live_id = 0;
    ASSERT_TRUE(f.connection.send(live_q.wire(), &live, live_id));
    int conn1 = -1;
    ASSERT_TRUE(f.run_until([&] { return (conn1 = f.server.accept_tcp()) >= 0; }));
    ASSERT_EQ(read_frames(f, conn1, 1).size(), 1u);
    ASSERT_TRUE(f.connection.open());

    const Question lost_q = ResolverHarness::question("lost.example.test");
    RecordingWaiter gave_up;
    for (int i = 0; i < 256; ++i) {  // a quarter of the 1,024 live queries a socket takes
        uint16_t id;
        ASSERT_TRUE(f.connection.send(lost_q.wire(), &gave_up, id));
        f.connection.cancel(id, &gave_up);
    }
    const auto lost_frames = read_frames(f, conn1, 256);
    ASSERT_EQ(lost_frames.size(), 256u);
    EXPECT_EQ(f.counters.upstream_stream_replaced.load(), 0u);

    const Question fresh_q = ResolverHarness::question("fresh.example.test");
    RecordingWaiter fresh;
    uint16_t fresh_id = 0;
    ASSERT_TRUE(f.connection.send(fresh_q.wire(), &fresh, fresh_id));
    EXPECT_EQ(f.counters.upstream_stream_replaced.load(), 1u);
    int conn2 = -1;
    ASSERT_TRUE(f.run_until([&] { return (conn2 = f.server.accept_tcp()) >= 0; }))
        << "the query after 256 abandoned ones did not go on a fresh socket";
    const auto fresh_frames = read_frames(f, conn2, 1);
    ASSERT_EQ(fresh_frames.size(), 1u);
    EXPECT_EQ(dns::read_u16(fresh_frames[0].data()), fresh_id);
    EXPECT_EQ(f.connection.outstanding(), 2u);  // live on the old socket, fresh on the new

    // Late answers to every abandoned ID, then the live query's answer, on the old socket.
    for (const auto& frame : lost_frames)
        send_frame(conn1, answer_to(frame, 0, 1, a_record(60, 1)));
    std::vector<uint8_t> live_query(dns::kMaxUpstreamQuery);
    live_query.resize(dns::write_upstream_query(live_q.wire(), live_id, 1232, live_query));
    send_frame(conn1, answer_to(live_query, 0, 1, a_record(300, 2)));
    ASSERT_TRUE(f.run_until([&] { return !live.answers.empty(); }));
    EXPECT_EQ(live.answers.size(), 1u);
    EXPECT_EQ(live.answers[0].back(), 2);
    EXPECT_TRUE(gave_up.answers.empty());
    EXPECT_EQ(f.counters.dropped_mismatched.load(), 0u) << "a quarantined ID's answer is expected";
    // Nothing waits on the old socket any more: it closes.
    ASSERT_TRUE(f.run_until([&] {
        uint8_t b;
        return recv(conn1, &b, 1, MSG_DONTWAIT) == 0;
    }));

    send_frame(conn2, answer_to(fresh_frames[0], 0, 1, a_record(300, 3)));
    ASSERT_TRUE(f.run_until([&] { return !fresh.answers.empty(); }));
    EXPECT_EQ(fresh.answers[0].back(), 3);
    EXPECT_EQ(fresh.failures + live.failures + gave_up.failures, 0);
    EXPECT_EQ(f.counters.upstream_stream_abandoned.load(), 256u);
    EXPECT_EQ(f.counters.upstream_connections.load(), 2u);
    EXPECT_EQ(f.connection.outstanding(), 0u);
    close(conn1);
    close(conn2);
}

// A reload that drops a server must not leave its connection where a new server, allocated at
// the same address in memory, would find it.
TEST(StreamPool, HoldsItsServersAndForgetsIdleOnesNoLongerRouted) {
    EventLoop loop;
    WorkerCounters counters;
    StreamPool pool(loop, counters, nullptr, StreamOptions{});
    testing::ManualUpstream upstream;
    auto kept = std::make_shared<UpstreamServer>(upstream.address);
    auto dropped = std::make_shared<UpstreamServer>(upstream.address);
    std::weak_ptr<UpstreamServer> dropped_weak = dropped;
    StreamConnection& first = pool.tcp(kept);
    EXPECT_EQ(&pool.tcp(kept), &first);
    StreamConnection& busy = pool.tcp(dropped);
    EXPECT_NE(&busy, &first);
    RecordingWaiter waiter;
    uint16_t id;
    ASSERT_TRUE(busy.send(ResolverHarness::question("busy.example.test").wire(), &waiter, id));
    dropped.reset();
    EXPECT_FALSE(dropped_weak.expired()) << "the pool keeps a server it has a connection to";

    pool.forget_others({kept.get()});
    EXPECT_FALSE(dropped_weak.expired()) << "a connection with a query on it stays";
    busy.cancel(id, &waiter);
    busy.reset();  // the query is dropped with the connection
    for (int i = 0; i < 10; ++i) loop.run_once(1);
    pool.forget_others({kept.get()});
    EXPECT_TRUE(dropped_weak.expired());
    EXPECT_EQ(&pool.tcp(kept), &first);
}

}  // namespace
}  // namespace nscache::upstream
