// SPDX-License-Identifier: BSD-3-Clause
#include "front/host_front.h"

#include <gtest/gtest.h>
#include <poll.h>

#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "front/front_test_support.h"
#include "front/request_socket.h"
#include "upstream/upstream_test_support.h"

namespace nscache::front {
namespace {

using testing::connect_as_child;
using testing::FrontHarness;
using testing::held;
using testing::read_reply;
using testing::send_all;

// A protocol of one-byte requests: byte 'n' asks for "one" (AF_INET), 'u' for a name only
// the upstream knows, a capital letter for a name of its own under flood.test (upstream too),
// anything else for "two". Replies 'F' when found, 'x' when not, and counts what the front
// tells it.
class ByteProtocol final : public Protocol {
  public:
    ByteProtocol(HostFront& front, std::string path, size_t max_per_user = 0)
        : front_(front),
          socket_(front.loop(), *this,
                  RequestSocketOptions{.path = std::move(path),
                                       .what = "test socket",
                                       .max_connections = 16,
                                       .timeout_ms = 1000,
                                       .max_per_user = max_per_user}) {
        front.add(*this, max_per_user);
    }

    RequestSocket& socket() { return socket_; }

    size_t request_size(std::span<const uint8_t> in) const override {
        if (in.empty()) return 0;
        return in[0] == '!' ? kInvalid : 1;
    }
    void on_request(RequestConnection& connection, std::span<const uint8_t> request) override {
        hostdb::HostQuery q;
        const char c = static_cast<char>(request[0]);
        q.name = c == 'n'   ? "one"
                 : c == 'u' ? "www.example.test"
                 : c >= 'A' && c <= 'Z'
                     ? std::string(1, static_cast<char>(c - 'A' + 'a')) + ".flood.test"
                     : "two";
        q.family = 2;
        q.search = false;
        if (auto answer = front_.lookup(*this, q, connection.id(), connection.peer_uid())) {
            connection.send({static_cast<uint8_t>(answer->found() ? 'F' : 'x')});
        }
    }
    void host_done(uint64_t id, const hostdb::HostAnswer& answer) override {
        ++late_answers;
        if (RequestConnection* c = socket_.find(id)) {
            c->send({static_cast<uint8_t>(answer.found() ? 'F' : 'x')});
        }
    }
    void hosts_changed() override { ++hosts_changes; }
    void start() override {
        ASSERT_TRUE(socket_.listen(16));
        socket_.start();
        ++starts;
    }
    void on_thread_start() override { ++thread_starts; }
    void on_wake() override { ++wakes; }
    void on_stopped() override { stop_order.push_back(this); }

    int hosts_changes = 0;
    int starts = 0;
    int thread_starts = 0;
    int wakes = 0;
    int late_answers = 0;
    static inline std::vector<ByteProtocol*> stop_order;

  private:
    HostFront& front_;
    RequestSocket socket_;
};

// Asks `byte` on a fresh connection and returns the reply ("" when closed without one).
std::string ask(FrontHarness& h, const std::string& path, char byte) {
    const int fd = connect_as_child(path);
    EXPECT_GE(fd, 0);
    send_all(fd, {static_cast<uint8_t>(byte)});
    h.turns();
    bool closed = false;
    const std::vector<uint8_t> reply = read_reply(fd, &closed);
    EXPECT_TRUE(closed);
    close(fd);
    return std::string(reply.begin(), reply.end());
}

// The same with the loop on its own thread: waits (a bounded poll) for the reply.
std::string ask_threaded(const std::string& path) {
    const int fd = connect_as_child(path);
    EXPECT_GE(fd, 0);
    send_all(fd, {'n'});
    pollfd p{fd, POLLIN, 0};
    EXPECT_EQ(poll(&p, 1, 10'000), 1);
    char reply[8];
    const ssize_t n = recv(fd, reply, sizeof reply, 0);
    close(fd);
    return n > 0 ? std::string(reply, static_cast<size_t>(n)) : std::string();
}

// Issue 17: both protocols on one thread, one HostLookup: each socket is answered from the
// one hosts file, and the answer goes to the protocol that asked.
TEST(HostFront, ServesTwoProtocolsFromOneHostsFile) {
    FrontHarness h;
    ByteProtocol a(h.front, h.socket_path("a.sock"));
    ByteProtocol b(h.front, h.socket_path("b.sock"));
    ASSERT_TRUE(a.socket().bind());
    ASSERT_TRUE(b.socket().bind());
    h.front.run_on_this_thread();
    EXPECT_EQ(a.starts, 1);
    EXPECT_EQ(b.thread_starts, 1);
    EXPECT_EQ(ask(h, h.socket_path("a.sock"), 'n'), "F");
    EXPECT_EQ(ask(h, h.socket_path("b.sock"), 'n'), "F");
    EXPECT_EQ(a.late_answers + b.late_answers, 0);  // from the hosts file: at once
}

// Issue 17: /etc/hosts was read and watched once per front thread, so an edit invalidated
// each map twice. Now: one read at start, one reload per edit, each protocol told once; a
// rewrite with the same bytes (the editor's close after its write, a touch) tells nobody.
TEST(HostFront, OneHostsFileEditTellsEachProtocolOnce) {
    FrontHarness h;
    ByteProtocol a(h.front, h.socket_path("a.sock"));
    ByteProtocol b(h.front, h.socket_path("b.sock"));
    ASSERT_TRUE(a.socket().bind());
    ASSERT_TRUE(b.socket().bind());
    h.front.run_on_this_thread();
    EXPECT_EQ(a.hosts_changes, 1);  // the first read
    EXPECT_EQ(b.hosts_changes, 1);

    testing::write_file(h.hosts_path(), "192.0.2.2 two\n");  // in place: truncate, write, close
    h.turns();
    EXPECT_EQ(a.hosts_changes, 2);
    EXPECT_EQ(b.hosts_changes, 2);
    EXPECT_EQ(ask(h, h.socket_path("a.sock"), 't'), "F");  // "two" is in the file now

    testing::write_file(h.hosts_path(), "192.0.2.2 two\n");  // the same bytes again
    h.turns();
    EXPECT_EQ(a.hosts_changes, 2);
    EXPECT_EQ(b.hosts_changes, 2);

    const std::string next = h.hosts_path() + ".new";  // an editor's rename over the file
    testing::write_file(next, "192.0.2.3 three\n");
    ASSERT_EQ(std::rename(next.c_str(), h.hosts_path().c_str()), 0);
    h.turns();
    EXPECT_EQ(a.hosts_changes, 3);
    EXPECT_EQ(b.hosts_changes, 3);
}

// Both protocols share one HostLookup, so one completion queue: an answer that comes back
// from upstream reaches the protocol that asked, with its id, and no other.
TEST(HostFront, ALateAnswerReachesTheProtocolThatAsked) {
    upstream::testing::ManualUpstream upstream;
    FrontHarness h("192.0.2.1 one\n", upstream.address);
    ByteProtocol a(h.front, h.socket_path("a.sock"));
    ByteProtocol b(h.front, h.socket_path("b.sock"));
    ASSERT_TRUE(a.socket().bind());
    ASSERT_TRUE(b.socket().bind());
    h.front.run_on_this_thread();
    const int fd = connect_as_child(h.socket_path("b.sock"));
    ASSERT_GE(fd, 0);
    send_all(fd, {'u'});
    std::optional<upstream::testing::ManualUpstream::Received> query;
    for (int i = 0; i < 400 && !query; ++i) {  // real I/O: bounded turns, no sleeps
        h.front.run_once(5);
        query = upstream.take_udp();
    }
    ASSERT_TRUE(query);
    upstream.reply_udp(*query, upstream::testing::answer_to(query->msg, 0, 1,
                                                            upstream::testing::a_record(300, 7)));
    for (int i = 0; i < 400 && b.late_answers == 0; ++i) h.front.run_once(5);
    EXPECT_EQ(b.late_answers, 1);
    EXPECT_EQ(a.late_answers, 0);
    h.turns();
    bool closed = false;
    const std::vector<uint8_t> reply = read_reply(fd, &closed);
    EXPECT_EQ(std::string(reply.begin(), reply.end()), "F");
    close(fd);
}

// Answers every query the upstream has received with an address, for `turns` bounded turns
// of the loop (real I/O: no sleeps) or until `done` says so.
template <typename Done>
void answer_everything(FrontHarness& h, upstream::testing::ManualUpstream& upstream, Done done) {
    for (int i = 0; i < 400 && !done(); ++i) {
        h.front.run_once(5);
        while (auto query = upstream.take_udp()) {
            upstream.reply_udp(*query, upstream::testing::answer_to(
                                           query->msg, 0, 1, upstream::testing::a_record(300, 7)));
        }
    }
}

// Review finding 2: both protocols forward through the front's one Resolver. One protocol's
// clients (here every one of them, asking names an upstream leaves unanswered) must not take
// the upstream queries the other one needs: each protocol has a resolver's worth of its own,
// and past its bound its own clients are told "try again" at once.
TEST(HostFront, OneProtocolCannotTakeTheOthersUpstreamQueries) {
    upstream::testing::ManualUpstream upstream;
    FrontHarness h("192.0.2.1 one\n", upstream.address, /*max_upstream_queries=*/8);
    ByteProtocol a(h.front, h.socket_path("a.sock"), /*max_per_user=*/16);
    ByteProtocol b(h.front, h.socket_path("b.sock"));
    ASSERT_TRUE(a.socket().bind());
    ASSERT_TRUE(b.socket().bind());
    h.front.run_on_this_thread();
    std::vector<int> flood;
    for (char c = 'A'; c < 'A' + 12; ++c) {
        flood.push_back(connect_as_child(h.socket_path("a.sock")));
        ASSERT_GE(flood.back(), 0);
        send_all(flood.back(), {static_cast<uint8_t>(c)});
        h.turns(2);
    }
    h.turns();
    size_t refused = 0;  // told "try again" at once
    for (int fd : flood) refused += read_reply(fd) == std::vector<uint8_t>{'x'} ? 1 : 0;
    EXPECT_GE(refused, 12u - 8u / 2);  // at most half its share of queries in flight

    const int fd = connect_as_child(h.socket_path("b.sock"));
    ASSERT_GE(fd, 0);
    send_all(fd, {'u'});
    h.turns();  // asked before any upstream answers: the flood is still in flight
    std::vector<uint8_t> reply;
    answer_everything(h, upstream, [&] {
        if (reply.empty()) reply = read_reply(fd);
        return !reply.empty();
    });
    EXPECT_EQ(std::string(reply.begin(), reply.end()), "F");
    close(fd);
    for (int f : flood) close(f);
}

// Settings posted from another thread are taken on the front's thread at its next wake-up,
// and every protocol's on_wake runs after it.
TEST(HostFront, PostedSettingsWakeTheLoopAndEveryProtocol) {
    FrontHarness h;
    ByteProtocol a(h.front, h.socket_path("a.sock"));
    ASSERT_TRUE(a.socket().bind());
    h.front.run_on_this_thread();
    const int before = a.wakes;
    std::thread poster([&h] { h.front.post_settings(h.settings); });
    poster.join();
    h.turns(1);
    EXPECT_EQ(a.wakes, before + 1);
}

// The daemon's shutdown relies on it: protocols stop in the order they were added (nscd's
// first, so that glibc's clients drop the map before anything else goes).
TEST(HostFront, StopRunsTheProtocolsInTheOrderAdded) {
    ByteProtocol::stop_order.clear();
    FrontHarness h;
    ByteProtocol first(h.front, h.socket_path("a.sock"));
    ByteProtocol second(h.front, h.socket_path("b.sock"));
    ASSERT_TRUE(first.socket().bind());
    ASSERT_TRUE(second.socket().bind());
    h.front.start();  // a real thread this once
    EXPECT_EQ(ask_threaded(h.socket_path("a.sock")), "F");
    h.front.stop();
    ASSERT_EQ(ByteProtocol::stop_order.size(), 2u);
    EXPECT_EQ(ByteProtocol::stop_order[0], &first);
    EXPECT_EQ(ByteProtocol::stop_order[1], &second);
    h.front.stop();  // once only
    EXPECT_EQ(ByteProtocol::stop_order.size(), 2u);
}

}  // namespace
}  // namespace nscache::front
