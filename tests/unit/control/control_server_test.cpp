// SPDX-License-Identifier: BSD-3-Clause
#include "control/control_server.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>
#include <vector>

namespace nscache::control {
namespace {

class ControlServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = ::testing::TempDir() + "nscache_control_XXXXXX";
        ASSERT_NE(mkdtemp(pattern.data()), nullptr);
        folder_ = pattern;
        options_.socket_path = folder_ + "/control.sock";
        options_.state_dir = folder_;
    }
    void TearDown() override {
        server_.reset();
        for (int fd : clients_) close(fd);
        unlink((folder_ + "/outside.dump").c_str());
        rmdir(folder_.c_str());
    }
    void start() {
        server_ = std::make_unique<ControlServer>(options_, cache_,
                                                  StatsSources{{}, &cache_, nullptr, 0});
        ASSERT_TRUE(server_->open(geteuid()).ok());
        server_->start();
    }
    // A connected client (blocking, with a receive timeout so a failing test cannot hang).
    int connect_client() {
        const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, options_.socket_path.c_str(), sizeof addr.sun_path - 1);
        EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
        timeval tv{10, 0};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        clients_.push_back(fd);
        return fd;
    }
    // Everything the server sends until it closes the connection.
    static std::string read_all(int fd) {
        std::string text;
        char buf[4096];
        ssize_t n;
        while ((n = recv(fd, buf, sizeof buf, 0)) > 0) text.append(buf, static_cast<size_t>(n));
        return text;
    }
    // The request, and all the server wrote back. A client turned away at accept is answered
    // and closed before it sends: its send may fail (EPIPE), its answer is still there.
    std::string request(const std::string& line) {
        const int fd = connect_client();
        const ssize_t sent = send(fd, line.data(), line.size(), MSG_NOSIGNAL);
        (void)sent;
        return read_all(fd);
    }

    std::string folder_;
    ControlOptions options_;
    cache::Cache cache_{cache::CacheConfig{.budget_bytes = 1 << 20}};
    std::unique_ptr<ControlServer> server_;
    std::vector<int> clients_;
};

TEST_F(ControlServerTest, SlowClientsHoldNobodyUpAndAreClosedAtTheirDeadline) {
    options_.client_deadline_ms = 300;
    start();
    const int slow = connect_client();
    ASSERT_EQ(send(slow, "st", 2, MSG_NOSIGNAL), 2);  // and never the rest
    EXPECT_EQ(request("stats\n").rfind("ok\n", 0), 0u);
    EXPECT_EQ(read_all(slow), "") << "a client past its deadline gets no answer";
}

TEST_F(ControlServerTest, StopReturnsWhileClientsAreConnected) {
    start();
    for (int i = 0; i < 5; ++i) connect_client();
    ASSERT_EQ(send(clients_[0], "sta", 3, MSG_NOSIGNAL), 3);
    EXPECT_EQ(request("stats json\n").rfind("ok\n{", 0), 0u);
    server_->stop();
    for (int fd : clients_) EXPECT_EQ(read_all(fd), "");  // closed by stop()
}

TEST_F(ControlServerTest, ClientsOverTheBoundAreTurnedAway) {
    options_.max_clients = 2;
    start();
    connect_client();
    connect_client();
    // Both are accepted before the third: the server answers requests in order of arrival,
    // and this one is answered only after they were adopted.
    EXPECT_EQ(request("stats\n"), "error: busy, try again\n");
    close(clients_[0]);
    clients_[0] = -1;
    // The slot frees once the server sees the close: ask until it does.
    std::string answer;
    for (int i = 0; i < 200 && answer.rfind("ok\n", 0) != 0; ++i) {
        answer = request("stats\n");
        if (answer.rfind("ok\n", 0) != 0) usleep(10'000);
    }
    EXPECT_EQ(answer.rfind("ok\n", 0), 0u) << answer;
}

TEST_F(ControlServerTest, RequestsHaveALengthLimit) {
    start();
    EXPECT_EQ(request(std::string(ControlConnection::kMaxRequest + 100, 'x')),
              "error: request too long\n");
    EXPECT_EQ(request("no-such-command\n"), "error: unknown command 'no-such-command'\n");
    // A request cut off by the end of the stream is still answered.
    const int fd = connect_client();
    ASSERT_EQ(send(fd, "flush", 5, MSG_NOSIGNAL), 5);
    shutdown(fd, SHUT_WR);
    EXPECT_EQ(read_all(fd), "ok\nflushed 0 entries\n");
}

TEST_F(ControlServerTest, SocketIsBornWithItsMode) {
    start();
    struct stat st {};
    ASSERT_EQ(lstat(options_.socket_path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISSOCK(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_uid, geteuid());
}

TEST_F(ControlServerTest, DumpAndLoadStayInTheStateFolder) {
    start();
    const std::string outside = ::testing::TempDir() + "nscache_control_outside.dump";
    const std::string answer = server_->execute("dump " + outside);
    EXPECT_EQ(answer.rfind("error: ", 0), 0u) << answer;
    EXPECT_NE(answer.find("outside the state folder"), std::string::npos) << answer;
    EXPECT_NE(access(outside.c_str(), F_OK), 0);
    EXPECT_EQ(server_->execute("dump x.dump"), "ok\ndumped 0 entries to " + folder_ + "/x.dump\n");
    EXPECT_EQ(server_->execute("load x.dump"),
              "ok\nloaded 0 entries from " + folder_ + "/x.dump\n");
    unlink((folder_ + "/x.dump").c_str());
}

// A loopback TCP port free now (bound, read, closed), for an HTTP endpoint.
uint16_t free_tcp_port() {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    close(fd);
    return ntohs(a.sin_port);
}

// The whole answer to `request` sent to 127.0.0.1:`port`.
std::string http(uint16_t port, const std::string& request) {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    timeval tv{10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    const ssize_t sent = send(fd, request.data(), request.size(), MSG_NOSIGNAL);
    (void)sent;
    std::string text;
    char buf[4096];
    ssize_t n;
    while ((n = recv(fd, buf, sizeof buf, 0)) > 0) text.append(buf, static_cast<size_t>(n));
    close(fd);
    return text;
}

std::string status_line(const std::string& reply) {
    return reply.substr(0, reply.find("\r\n"));
}

// /ready follows the Readiness through starting, ready and draining; /health stays 200.
TEST_F(ControlServerTest, HealthEndpointFollowsReadiness) {
    const uint16_t port = free_tcp_port();
    Readiness readiness;
    options_.health_listen = parse_socket_address("127.0.0.1:" + std::to_string(port), {});
    options_.health = HealthSources{&readiness, {}};
    start();
    const std::string get_ready = "GET /ready HTTP/1.1\r\nHost: x\r\n\r\n";
    std::string reply = http(port, get_ready);
    EXPECT_EQ(status_line(reply), "HTTP/1.0 503 Service Unavailable");
    EXPECT_NE(reply.find("\r\n\r\nstarting\n"), std::string::npos) << reply;
    EXPECT_EQ(status_line(http(port, "GET /health HTTP/1.0\r\n\r\n")), "HTTP/1.0 200 OK");
    readiness.set_ready();
    EXPECT_EQ(status_line(http(port, get_ready)), "HTTP/1.0 200 OK");
    readiness.set_draining();
    reply = http(port, get_ready);
    EXPECT_EQ(status_line(reply), "HTTP/1.0 503 Service Unavailable");
    EXPECT_NE(reply.find("draining"), std::string::npos);
    EXPECT_EQ(status_line(http(port, "HEAD /health HTTP/1.0\r\n\r\n")), "HTTP/1.0 200 OK");
    EXPECT_EQ(status_line(http(port, "GET /metrics HTTP/1.0\r\n\r\n")), "HTTP/1.0 404 Not Found");
    EXPECT_EQ(status_line(http(port, "POST /ready HTTP/1.0\r\n\r\n")),
              "HTTP/1.0 405 Method Not Allowed");
    // A head that never ends within the bound.
    EXPECT_EQ(status_line(http(port, "GET /ready HTTP/1.0\r\nX: " +
                                         std::string(ControlConnection::kMaxRequest, 'a'))),
              "HTTP/1.0 431 Request Header Fields Too Large");
}

// An idle HTTP client is closed at the endpoints' own deadline, not the control socket's,
// and a head ended by bare LFs is answered at once.
TEST_F(ControlServerTest, HealthClientsHaveAShorterDeadlineAndBareLfHeadsAreAnswered) {
    const uint16_t port = free_tcp_port();
    Readiness readiness;
    options_.health_listen = parse_socket_address("127.0.0.1:" + std::to_string(port), {});
    options_.health = HealthSources{&readiness, {}};
    options_.client_deadline_ms = 60'000;  // would outlast the client's 10 s receive timeout
    options_.http_deadline_ms = 300;
    start();
    EXPECT_EQ(status_line(http(port, "GET /health HTTP/1.0\n\n")), "HTTP/1.0 200 OK");
    EXPECT_EQ(http(port, "GET /health HTTP/1.1\r\nHost: x\r\n"), "")
        << "an unfinished head is closed unanswered at the deadline";
}

// One socket for both when health-listen is metrics-listen; metrics-allow then applies.
TEST_F(ControlServerTest, HealthOnTheMetricsAddress) {
    const uint16_t port = free_tcp_port();
    Readiness readiness;
    readiness.set_ready();
    const auto address = parse_socket_address("127.0.0.1:" + std::to_string(port), {});
    options_.metrics_listen = address;
    options_.health_listen = address;
    options_.health = HealthSources{&readiness, {}};
    start();
    EXPECT_EQ(status_line(http(port, "GET /ready HTTP/1.0\r\n\r\n")), "HTTP/1.0 200 OK");
    EXPECT_EQ(status_line(http(port, "GET /metrics HTTP/1.0\r\n\r\n")), "HTTP/1.0 200 OK");
}

}  // namespace
}  // namespace nscache::control

namespace nscache::control {
namespace {

TEST_F(ControlServerTest, TakeoverIsRefusedWithoutItsHooks) {
    start();
    EXPECT_EQ(request("takeover\n"), "error: takeover is not available\n");
    EXPECT_EQ(request("stats\n").rfind("ok\n", 0), 0u);  // and the server serves on
}

// The connection hands its socket to the takeover session, which sends the offer, waits for
// "ready" (on a deadline of its own: TakeoverSessionTest) and drains once; a second takeover
// while one waits is refused, and any after the drain.
TEST_F(ControlServerTest, TakeoverHandsTheOfferAndDrainsOnReady) {
    std::atomic<int> drains{0};
    options_.takeover.offer = []() -> Result<std::vector<NamedFd>> {
        return std::vector<NamedFd>{{"cache", open("/dev/null", O_RDONLY | O_CLOEXEC)}};
    };
    options_.takeover.drain = [&drains] { ++drains; };
    start();
    const int fd = connect_client();
    ASSERT_EQ(send(fd, "takeover\n", 9, MSG_NOSIGNAL), 9);
    Result<std::vector<NamedFd>> offer = receive_takeover(fd);
    ASSERT_TRUE(offer.ok()) << offer.error();
    ASSERT_EQ(offer->size(), 1u);
    close_all(*offer);
    EXPECT_EQ(request("takeover\n"), "error: a takeover is already in progress\n");
    EXPECT_EQ(drains.load(), 0);
    ASSERT_EQ(send(fd, "ready\n", 6, MSG_NOSIGNAL), 6);
    EXPECT_EQ(read_all(fd), "ok draining\n");
    EXPECT_EQ(drains.load(), 1);
    EXPECT_EQ(request("takeover\n"), "error: this instance is draining\n");
}

}  // namespace
}  // namespace nscache::control
