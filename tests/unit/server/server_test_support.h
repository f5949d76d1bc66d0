// SPDX-License-Identifier: BSD-3-Clause
// Test harness for the event-driven server code: a real cache, QueryPipeline and TCP
// connections on a real EventLoop, with a fake Forwarder in place of the resolver so a test
// decides when (and how) misses are answered. Clients are socketpairs; the loop reads a
// FakeClock, so a timeout is crossed by advancing it (run_for), never by sleeping.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <functional>
#include <optional>
#include <vector>

#include "cache/cache.h"
#include "cache/cache_test_support.h"
#include "common/event_loop.h"
#include "config/config.h"
#include "fake_clock.h"
#include "server/query_pipeline.h"
#include "server/server_shared.h"
#include "server/settings.h"
#include "server/tcp_connection.h"
#include "upstream/forwarder.h"
#include "upstream/upstream_set.h"

namespace nscache::server::testing {

using nscache::testing::WireBuilder;

struct FakeForwarder final : upstream::Forwarder {
    struct Call {
        upstream::Question question;
        uint64_t cookie;
    };
    std::vector<Call> resolved;
    std::vector<uint64_t> left;
    std::vector<Call> resolved_locally;
    std::vector<upstream::Question> refreshed;
    bool answers_locally = false;  // resolve_local() takes the question (a local name)
    bool accept = true;
    bool fail_all = false;  // failing() says every question failed a moment ago (RFC 9520)
    // Breaks the Forwarder contract on purpose: answers from inside resolve(), as the resolver
    // once did when over its limit. Code above must survive even that.
    std::function<void(uint64_t cookie)> answer_inside_resolve;

    bool resolve(const upstream::Question& question, uint64_t cookie) override {
        if (!accept) return false;
        resolved.push_back({question, cookie});
        if (answer_inside_resolve) answer_inside_resolve(cookie);
        return true;
    }
    bool resolve_local(const upstream::Question& question, uint64_t cookie) override {
        if (!answers_locally) return false;
        resolved_locally.push_back({question, cookie});
        return true;
    }
    void refresh(const upstream::Question& question) override { refreshed.push_back(question); }
    void leave(const upstream::Question&, uint64_t cookie) override { left.push_back(cookie); }
    bool all_upstreams_down(const upstream::Question&) const override { return false; }
    bool failing(const upstream::Question&, upstream::FailureReason* reason) override {
        if (fail_all && reason != nullptr) *reason = upstream::FailureReason::NoReachableAuthority;
        return fail_all;
    }
};

inline sockaddr_storage loopback_peer(uint16_t port = 40000) {
    sockaddr_storage ss{};
    auto* in = reinterpret_cast<sockaddr_in*>(&ss);
    in->sin_family = AF_INET;
    in->sin_port = htons(port);
    in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ss;
}

inline Config test_config() {
    Config c;
    c.allow = {*parse_cidr("127.0.0.0/8")};
    return c;
}

// One worker's pipeline and TCP connections over a fake forwarder.
struct ServerHarness final : ReplySender {
    explicit ServerHarness(Config c = test_config(), TcpLimits limits = {})
        : config(std::move(c)),
          cache(cache::CacheConfig{.budget_bytes = size_t{4} << 20}),
          settings(make_settings(config, nullptr, 4096)),
          resolver_shared{{}, cache, {}, {}},
          shared{config, cache, resolver_shared, {}},
          loop(clock),
          pipeline(shared, loop, forwarder, counters, *this, *settings),
          tcp(loop, pipeline, shared.tcp) {
        tcp.set_limits(limits);
    }
    ~ServerHarness() { tcp.close_all(); }

    void send_reply(const PendingClient& client, std::span<const uint8_t> reply) override {
        replies.emplace_back(reply.begin(), reply.end());
        if (client.transport != Transport::Tcp) {
            if (other_transport) other_transport(client, reply);
            return;
        }
        if (TcpConnection* c = tcp.find(client.tcp_connection)) c->send_answer(reply);
    }

    // A TCP client: the daemon's end goes to `tcp`; returns the client's end. `send_buffer`:
    // the daemon side's SO_SNDBUF, small to make answers wait in the daemon.
    int connect_client(uint16_t port = 40000, int send_buffer = 0) {
        int fds[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
        if (send_buffer > 0)
            setsockopt(fds[0], SOL_SOCKET, SO_SNDBUF, &send_buffer, sizeof send_buffer);
        const sockaddr_storage peer = loopback_peer(port);
        EXPECT_TRUE(tcp.adopt(fds[0], peer, sizeof(sockaddr_in)));
        return fds[1];
    }

    // Stores an A answer for `name` (TTL 300) in the cache.
    void cache_a(std::string_view name) {
        auto answer = cache::testing::prepare(cache::testing::positive_answer(name, {300}),
                                              cache::TtlPolicy{});
        dns::NameBuffer lower;
        dns::lower_name(dns::name_from_text(name)->view(), lower);
        cache.insert(cache::CacheKey{lower.view(), dns::rtype::A, dns::kClassIN, 0}, *answer,
                     loop.now_ms());
    }

    // `turns` turns of the loop, the clock `step_ms` on before each; no real waiting (a
    // socketpair's bytes are readable as soon as they are written).
    void run_for(int turns, uint64_t step_ms = 5) {
        for (int i = 0; i < turns; ++i) {
            clock.advance_ms(step_ms);
            loop.run_once(0);
        }
    }

    Config config;
    cache::Cache cache;
    SettingsPtr settings;
    upstream::ResolverShared resolver_shared;
    ServerShared shared;
    nscache::testing::FakeClock clock;
    EventLoop loop;
    WorkerCounters counters;
    FakeForwarder forwarder;
    QueryPipeline pipeline;
    TcpConnections tcp;
    std::vector<std::vector<uint8_t>> replies;  // everything sent through send_reply
    // Where answers for other transports than TCP go (the DoH tests' connections).
    std::function<void(const PendingClient&, std::span<const uint8_t>)> other_transport;
};

// A query for (name, qtype) as a client writes it, with a 2-byte length prefix for TCP.
inline std::vector<uint8_t> tcp_query(std::string_view name, uint16_t qtype, uint16_t id) {
    WireBuilder b;
    b.header(id, dns::flag::RD, 1).question(name, qtype);
    // Sized once (g++ 12 -O2 warns -Warray-bounds, falsely, on insert() after 2 bytes).
    std::vector<uint8_t> framed(2 + b.bytes.size());
    dns::write_u16(framed.data(), static_cast<uint16_t>(b.size()));
    std::memcpy(framed.data() + 2, b.bytes.data(), b.bytes.size());
    return framed;
}

inline void write_all(int fd, const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
}

// Reads every complete framed message available now; sets *eof when the daemon closed.
inline std::vector<std::vector<uint8_t>> read_messages(int fd, std::vector<uint8_t>& buffer,
                                                       bool* eof = nullptr) {
    uint8_t chunk[65536];
    for (;;) {
        const ssize_t n = recv(fd, chunk, sizeof chunk, MSG_DONTWAIT);
        if (n > 0) {
            buffer.insert(buffer.end(), chunk, chunk + n);
            continue;
        }
        if (n == 0 && eof != nullptr) *eof = true;
        break;
    }
    std::vector<std::vector<uint8_t>> out;
    size_t at = 0;
    while (buffer.size() - at >= 2) {
        const size_t length = dns::read_u16(buffer.data() + at);
        if (buffer.size() - at < 2 + length) break;
        out.emplace_back(buffer.begin() + static_cast<ptrdiff_t>(at + 2),
                         buffer.begin() + static_cast<ptrdiff_t>(at + 2 + length));
        at += 2 + length;
    }
    buffer.erase(buffer.begin(), buffer.begin() + static_cast<ptrdiff_t>(at));
    return out;
}

// A UDP (or TCP listening) socket on 127.0.0.1, port chosen by the kernel, non-blocking as
// the daemon's own; *port gets the port.
inline int loopback_socket(int type, uint16_t* port) {
    const int fd = socket(AF_INET, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (type == SOCK_STREAM) {
        EXPECT_EQ(listen(fd, 16), 0);
    }
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    *port = ntohs(a.sin_port);
    return fd;
}

// A client socket connected to 127.0.0.1:`port` (UDP: a default destination; TCP: the
// handshake is done by the kernel before accept, so no loop turn is needed for it).
inline int loopback_client(int type, uint16_t port) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    return fd;
}

// A datagram waiting on `fd` now, if any (never blocks).
inline std::optional<std::vector<uint8_t>> recv_now(int fd) {
    std::vector<uint8_t> buffer(65536);
    const ssize_t n = recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n < 0) return std::nullopt;
    buffer.resize(static_cast<size_t>(n));
    return buffer;
}

}  // namespace nscache::server::testing
