// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/upstream_query.h"

#include <gtest/gtest.h>
#include <poll.h>

#include "upstream_test_support.h"

namespace nscache::upstream {
namespace {

using testing::a_record;
using testing::answer_to;
using testing::ResolverHarness;

// True once the peer of `fd` has closed it (or reset it).
bool peer_closed(int fd) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 0) != 1) return false;
    char c;
    return recv(fd, &c, 1, MSG_DONTWAIT) <= 0;
}

// The first query the daemon sends on TCP connection `conn`, without its length prefix;
// empty if none came.
std::vector<uint8_t> read_framed_query(ResolverHarness& h, int conn) {
    std::vector<uint8_t> framed(2 + 512);
    size_t have = 0;
    const bool whole = h.run_until([&] {
        const ssize_t n = recv(conn, framed.data() + have, framed.size() - have, MSG_DONTWAIT);
        if (n > 0) have += static_cast<size_t>(n);
        return have >= 2 && have >= 2u + dns::read_u16(framed.data());
    });
    if (!whole) return {};
    return std::vector<uint8_t>(framed.begin() + 2,
                                framed.begin() + 2 + dns::read_u16(framed.data()));
}

// Sends `message` on `conn` with its two-byte length (RFC 1035 §4.2.2).
bool send_framed(int conn, const std::vector<uint8_t>& message) {
    std::vector<uint8_t> out(2);
    dns::write_u16(out.data(), static_cast<uint16_t>(message.size()));
    out.insert(out.end(), message.begin(), message.end());
    return send(conn, out.data(), out.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(out.size());
}

TEST(UpstreamQuery, TruncatedAnswerIsAskedAgainOverTcp) {
    ResolverHarness h;
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("big.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*q, answer_to(q->msg, dns::flag::TC, 0, {}));
    int conn = -1;
    ASSERT_TRUE(h.run_until([&] { return (conn = h.fake().accept_tcp()) >= 0; }));
    // Read the framed query, answer it in full.
    const std::vector<uint8_t> tcp_query = read_framed_query(h, conn);
    ASSERT_FALSE(tcp_query.empty());
    auto answer = answer_to(tcp_query, 0, 1, a_record(300, 9));
    ASSERT_TRUE(send_framed(conn, answer));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ancount, 1);
    EXPECT_EQ(h.counters.upstream_tcp_retries.load(), 1u);
    close(conn);
}

// A malformed answer over TCP used to leave the query's TCP socket open (and registered)
// until the whole query ended; the socket is done with as soon as its answer is.
TEST(UpstreamQuery, MalformedTcpAnswerClosesTheConnectionAtOnce) {
    ResolverOptions options;
    options.query_timeout_ms = 10'000;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("big.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*q, answer_to(q->msg, dns::flag::TC, 0, {}));
    int conn = -1;
    ASSERT_TRUE(h.run_until([&] { return (conn = h.fake().accept_tcp()) >= 0; }));
    const std::vector<uint8_t> tcp_query = read_framed_query(h, conn);
    ASSERT_FALSE(tcp_query.empty());
    // Our ID and question, then an answer count with no record behind it.
    auto answer = answer_to(tcp_query, 0, 3, {});
    ASSERT_TRUE(send_framed(conn, answer));
    // Well before the query's 10 s deadline (and its next attempt's wait).
    EXPECT_TRUE(h.run_until([&] { return peer_closed(conn); }, 60));
    EXPECT_TRUE(h.sink.deliveries.empty());  // the query goes on with another attempt
    close(conn);
}

// What `nscache stats` shows per upstream server and per set (a forwarding rule's, or the
// default one): an error answer counts as an answer and an error of that server, the query
// moves on to the next server, and the question counts once for the set.
TEST(UpstreamQuery, CountsAnswersAndErrorsPerServerAndQuestionsPerSet) {
    ResolverHarness h({}, 2);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("count.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> first;
    size_t asked = 0;
    ASSERT_TRUE(h.run_until([&] {
        for (size_t i = 0; i < 2 && !first; ++i) {
            if ((first = h.fake(i).take_udp())) asked = i;
        }
        return first.has_value();
    }));
    h.fake(asked).reply_udp(
        *first, answer_to(first->msg, static_cast<uint16_t>(dns::Rcode::ServFail), 0, {}));
    const size_t other = 1 - asked;
    std::optional<testing::ManualUpstream::Received> second;
    ASSERT_TRUE(h.run_until([&] { return (second = h.fake(other).take_udp()).has_value(); }));
    h.fake(other).reply_udp(*second, answer_to(second->msg, 0, 1, a_record(300, 7)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));

    const UpstreamServer& failed = h.upstreams.at(asked);
    const UpstreamServer& good = h.upstreams.at(other);
    EXPECT_EQ(failed.queries.load(), 1u);
    EXPECT_EQ(failed.answers.load(), 1u);
    EXPECT_EQ(failed.errors.load(), 1u);
    EXPECT_EQ(good.queries.load(), 1u);
    EXPECT_EQ(good.answers.load(), 1u);
    EXPECT_EQ(good.errors.load(), 0u);
    EXPECT_EQ(h.upstreams.counters().questions.load(), 1u);
    EXPECT_EQ(h.upstreams.counters().failures.load(), 0u);
}

TEST(UpstreamQuery, AQuestionNoServerAnswersIsAFailureOfItsSet) {
    ResolverOptions options;
    options.query_timeout_ms = 200;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("silent.example.test"), 1));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    EXPECT_FALSE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.upstreams.counters().questions.load(), 1u);
    EXPECT_EQ(h.upstreams.counters().failures.load(), 1u);
    EXPECT_GE(h.upstreams.at(0).timeouts.load(), 1u);
    EXPECT_EQ(h.upstreams.at(0).answers.load(), 0u);
}

// Issue 16 item 11: with every UDP query of a question lost on the way (30% loss loses all
// three tries of one question in 37), the query used to wait out its whole query-timeout and
// answer SERVFAIL. After the three UDP tries RFC 9520 §3.1 allows per server, the next
// transport is asked: TCP, whose own retransmission gets through loss.
TEST(UpstreamQuery, AfterThreeLostUdpTriesTheServerIsAskedOverTcp) {
    ResolverHarness h;
    // One answer first: the server's RTT is known, as it is for a daemon that has run a while.
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("warm.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> warm;
    ASSERT_TRUE(h.run_until([&] { return (warm = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*warm, answer_to(warm->msg, 0, 1, a_record(300, 4)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    h.sink.deliveries.clear();

    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("lossy.example.test"), 2));
    int udp_seen = 0;
    int conn = -1;
    ASSERT_TRUE(h.run_until([&] {
        while (h.fake().take_udp()) ++udp_seen;  // every datagram lost
        return (conn = h.fake().accept_tcp()) >= 0;
    }));
    const std::vector<uint8_t> tcp_query = read_framed_query(h, conn);
    ASSERT_FALSE(tcp_query.empty());
    auto answer = answer_to(tcp_query, 0, 1, a_record(300, 5));
    ASSERT_TRUE(send_framed(conn, answer));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ancount, 1);
    while (h.fake().take_udp()) ++udp_seen;
    EXPECT_EQ(udp_seen, UpstreamQuery::kMaxTriesPerServer);  // the RFC 9520 cap, not one less
    close(conn);
}

// A datagram with our ID and question whose rest does not parse could not have its cookie
// checked, yet it ended the attempt as an answer: an off-path forger who matched ID and port
// reset the server's health and fed its RTT. It is a mismatch like any other: the socket is
// retired, the server's numbers stay, and the real answer, when it comes, is the one used.
TEST(UpstreamQuery, AMalformedUdpAnswerIsAMismatchNotAnAnswer) {
    ResolverOptions options;
    options.query_timeout_ms = 10'000;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("bad.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    // Our ID and question, then three answers announced and none there.
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 3, {}));
    h.run_until([&] {
        return h.counters.dropped_mismatched.load() + h.counters.upstream_errors.load() > 0;
    });
    EXPECT_EQ(h.counters.dropped_mismatched.load(), 1u);
    EXPECT_EQ(h.counters.upstream_errors.load(), 0u);
    EXPECT_EQ(h.upstreams.at(0).srtt_us.load(), 0u);  // no RTT sample from it
    EXPECT_EQ(h.upstreams.at(0).answers.load(), 0u);
    EXPECT_TRUE(h.sink.deliveries.empty());
    // The attempt is still open: the real answer lands on it, and the socket that was
    // found out is retired rather than pooled.
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 8)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ancount, 1);
    EXPECT_EQ(h.counters.upstream_sockets_spoofed.load(), 1u);
    EXPECT_EQ(h.upstreams.at(0).answers.load(), 1u);
    EXPECT_GT(h.upstreams.at(0).srtt_us.load(), 0u);
    EXPECT_FALSE(h.fake().take_udp());  // answered by the first try
}

// A server may cut a truncated answer mid-record (RFC 1035 §4.2.1): such an answer says "ask
// over TCP", at once, not "wait for another answer" (each of the three tries waited its full
// timeout as a suspected forgery, and TCP came after the deadline or never).
TEST(UpstreamQuery, ATruncatedAnswerCutMidRecordGoesToTcpAtOnce) {
    ResolverOptions options;
    options.query_timeout_ms = 10'000;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("cut.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    auto cut = answer_to(q->msg, dns::flag::TC, 3, a_record(300, 7));
    cut.resize(cut.size() - 6);  // the first record's RDATA cut short, two more announced
    h.fake().reply_udp(*q, cut);
    int conn = -1;
    ASSERT_TRUE(h.run_until([&] { return (conn = h.fake().accept_tcp()) >= 0; }));
    const std::vector<uint8_t> tcp_query = read_framed_query(h, conn);
    ASSERT_FALSE(tcp_query.empty());
    auto answer = answer_to(tcp_query, 0, 1, a_record(300, 7));
    ASSERT_TRUE(send_framed(conn, answer));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ancount, 1);
    EXPECT_EQ(h.counters.upstream_timeouts.load(), 0u);
    EXPECT_EQ(h.counters.dropped_mismatched.load(), 0u);
    EXPECT_FALSE(h.fake().take_udp());  // no second UDP try
    close(conn);
}

// A FORMERR to a query with a cookie is asked again without it; the server is taken for one
// that rejects cookies only when that retry is answered otherwise. One forged FORMERR (an
// off-path guess of ID and port) turned cookies off for an hour.
TEST(UpstreamQuery, OneFormerrDoesNotTurnCookiesOff) {
    ResolverOptions options;
    options.query_timeout_ms = 10'000;
    ResolverHarness h(options);
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("one.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    const size_t with_cookie = q->msg.size();
    h.fake().reply_udp(*q, answer_to(q->msg, static_cast<uint16_t>(dns::Rcode::FormErr), 0, {}));
    std::optional<testing::ManualUpstream::Received> retry;
    ASSERT_TRUE(h.run_until([&] { return (retry = h.fake().take_udp()).has_value(); }));
    EXPECT_LT(retry->msg.size(), with_cookie);  // asked again without the cookie
    h.fake().reply_udp(*retry,
                       answer_to(retry->msg, static_cast<uint16_t>(dns::Rcode::FormErr), 0, {}));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    // The next question, of the same length, still carries the cookie.
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("two.example.test"), 2));
    std::optional<testing::ManualUpstream::Received> next;
    ASSERT_TRUE(h.run_until([&] { return (next = h.fake().take_udp()).has_value(); }));
    EXPECT_EQ(next->msg.size(), with_cookie);
}

// The default rule's own options (the harness fills in its domain and servers).
ForwardZone rule_options(ForwardTransport transport, uint32_t max_ttl = kNoTtlCap,
                         uint32_t negative_max_ttl = kNoTtlCap) {
    ForwardZone z;
    z.transport = transport;
    z.max_ttl = max_ttl;
    z.negative_max_ttl = negative_max_ttl;
    return z;
}

// transport = "tcp": the question goes out on a TCP connection and never over UDP, and the
// next question is pipelined on the same connection.
TEST(UpstreamQuery, TcpRuleAsksOverTcpOnlyAndKeepsTheConnection) {
    ResolverHarness h({}, 1, rule_options(ForwardTransport::Tcp));
    ASSERT_TRUE(h.upstreams.tcp_only());
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("one.example.test"), 1));
    int conn = -1;
    ASSERT_TRUE(h.run_until([&] { return (conn = h.fake().accept_tcp()) >= 0; }));
    std::vector<uint8_t> query = read_framed_query(h, conn);
    ASSERT_FALSE(query.empty());
    ASSERT_TRUE(send_framed(conn, answer_to(query, 0, 1, a_record(300, 1))));
    ASSERT_TRUE(h.run_until([&] { return h.sink.deliveries.size() == 1; }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);

    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("two.example.test"), 2));
    query = read_framed_query(h, conn);
    ASSERT_FALSE(query.empty()) << "the second question came on the same connection";
    ASSERT_TRUE(send_framed(conn, answer_to(query, 0, 1, a_record(300, 2))));
    ASSERT_TRUE(h.run_until([&] { return h.sink.deliveries.size() == 2; }));
    EXPECT_FALSE(h.fake().take_udp().has_value());
    EXPECT_LT(h.fake().accept_tcp(), 0);  // no second connection
    EXPECT_EQ(h.counters.upstream_queries.load(), 2u);
    EXPECT_EQ(h.counters.upstream_tcp_retries.load(), 0u);
    close(conn);
}

// A tcp-only server that accepts and never answers is a timeout like a silent UDP one: the
// next server is asked (over TCP too), and the first is charged with the timeout.
TEST(UpstreamQuery, TcpRuleMovesOnFromASilentServer) {
    ResolverHarness h({}, 2, rule_options(ForwardTransport::Tcp));
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("slow.example.test"), 1));
    int first = -1, second = -1;
    ASSERT_TRUE(h.run_until([&] {
        if (first < 0) first = h.fake(0).accept_tcp();
        if (second < 0) second = h.fake(1).accept_tcp();
        return first >= 0 && second >= 0;
    }));
    // Whichever was asked second answers.
    std::vector<uint8_t> query = read_framed_query(h, second);
    int answering = second;
    if (query.empty()) {
        query = read_framed_query(h, first);
        answering = first;
    }
    ASSERT_FALSE(query.empty());
    ASSERT_TRUE(send_framed(answering, answer_to(query, 0, 1, a_record(300, 3))));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_FALSE(h.fake(0).take_udp().has_value());
    EXPECT_FALSE(h.fake(1).take_udp().has_value());
    EXPECT_GE(h.counters.upstream_timeouts.load(), 1u);
    close(first);
    close(second);
}

// The rule's caps over the global TtlPolicy: the smaller wins, for answers and negative ones.
TEST(UpstreamQuery, RuleTtlCapsApplyOverTheGlobalOnes) {
    ResolverOptions options;
    options.ttl = cache::TtlPolicy{.min_ttl = 60, .max_ttl = 3600, .negative_max_ttl = 20};
    ResolverHarness h(options, 1, rule_options(ForwardTransport::Udp, 30, 600));
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("capped.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 4)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    const auto& answer = h.sink.deliveries[0].outcome.answer;
    ASSERT_TRUE(answer);
    // The rule's 30 under the global 3600, and under min-ttl 60 too: a cap is a cap.
    EXPECT_EQ(answer->ttl, 30u);
    EXPECT_EQ(dns::read_u32(answer->records.data() + answer->ttl_offsets[0]), 30u);
    EXPECT_EQ(h.counters.upstream_queries.load(), 1u);
}

TEST(UpstreamQuery, GlobalTtlCapWinsWhenSmallerThanTheRules) {
    ResolverOptions options;
    options.ttl = cache::TtlPolicy{.max_ttl = 10};
    ResolverHarness h(options, 1, rule_options(ForwardTransport::Udp, 30));
    ASSERT_TRUE(h.resolver.resolve(ResolverHarness::question("global.example.test"), 1));
    std::optional<testing::ManualUpstream::Received> q;
    ASSERT_TRUE(h.run_until([&] { return (q = h.fake().take_udp()).has_value(); }));
    h.fake().reply_udp(*q, answer_to(q->msg, 0, 1, a_record(300, 5)));
    ASSERT_TRUE(h.run_until([&] { return !h.sink.deliveries.empty(); }));
    ASSERT_TRUE(h.sink.deliveries[0].outcome.answer);
    EXPECT_EQ(h.sink.deliveries[0].outcome.answer->ttl, 10u);
}

}  // namespace
}  // namespace nscache::upstream
