// SPDX-License-Identifier: BSD-3-Clause
// Test harness for the forwarding code: a Resolver on a real EventLoop, and a fake upstream
// server the test drives by hand (a UDP socket and a TCP listener on one loopback port), so
// a test reads each query the resolver sends and decides what comes back.
#pragma once

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "cache/cache.h"
#include "common/event_loop.h"
#include "dns/query.h"
#include "fake_clock.h"
#include "upstream/completion.h"
#include "upstream/resolver.h"
#include "upstream/routing.h"
#include "wire_builder.h"

namespace nscache::upstream::testing {

using nscache::testing::WireBuilder;

// A loopback server the test answers by hand.
struct ManualUpstream {
    int udp = -1;
    int tcp = -1;
    SocketAddress address;

    ManualUpstream() {
        // UDP and TCP on one port: the kernel picks a free UDP port, whose TCP twin may be in
        // use by another process's connection, so a few ports are tried.
        sockaddr_in a{};
        bool bound = false;
        for (int attempt = 0; attempt < 64 && !bound; ++attempt) {
            if (udp >= 0) close(udp);
            if (tcp >= 0) close(tcp);
            udp = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
            a = sockaddr_in{};
            a.sin_family = AF_INET;
            a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
            EXPECT_EQ(bind(udp, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
            socklen_t len = sizeof a;
            getsockname(udp, reinterpret_cast<sockaddr*>(&a), &len);
            tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
            const int one = 1;
            setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
            bound = bind(tcp, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
        }
        EXPECT_TRUE(bound) << "no port free for both UDP and TCP";
        EXPECT_EQ(listen(tcp, 8), 0);
        address = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    ~ManualUpstream() {
        close(udp);
        close(tcp);
    }

    struct Received {
        std::vector<uint8_t> msg;
        sockaddr_storage from{};
        socklen_t from_len = sizeof(sockaddr_storage);
    };

    // A query that arrived over UDP, if one is waiting.
    std::optional<Received> take_udp() {
        pollfd p{udp, POLLIN, 0};
        if (poll(&p, 1, 0) != 1) return std::nullopt;
        Received r;
        r.msg.resize(4096);
        const ssize_t n = recvfrom(udp, r.msg.data(), r.msg.size(), 0,
                                   reinterpret_cast<sockaddr*>(&r.from), &r.from_len);
        if (n <= 0) return std::nullopt;
        r.msg.resize(static_cast<size_t>(n));
        return r;
    }

    void reply_udp(const Received& to, const std::vector<uint8_t>& answer) {
        sendto(udp, answer.data(), answer.size(), 0, reinterpret_cast<const sockaddr*>(&to.from),
               to.from_len);
    }

    // A connection the resolver opened, if one is waiting.
    int accept_tcp() {
        pollfd p{tcp, POLLIN, 0};
        if (poll(&p, 1, 0) != 1) return -1;
        return accept4(tcp, nullptr, nullptr, SOCK_CLOEXEC);
    }
};

// An answer to `query` (a message the resolver sent): its ID and question, then `records`
// built by the caller with WireBuilder (owner names may point at offset 12).
inline std::vector<uint8_t> answer_to(const std::vector<uint8_t>& query, uint16_t flags,
                                      uint16_t ancount, const std::vector<uint8_t>& records) {
    const dns::ParsedQuery parsed = dns::parse_query(dns::Bytes(query));
    WireBuilder b;
    b.header(parsed.query.header.id, dns::flag::QR | dns::flag::RA | flags, 1, ancount);
    b.bytes.insert(b.bytes.end(), parsed.query.question.begin(), parsed.query.question.end());
    b.bytes.insert(b.bytes.end(), records.begin(), records.end());
    return b.bytes;
}

inline std::vector<uint8_t> a_record(uint32_t ttl, uint8_t last_octet) {
    WireBuilder b;
    b.name_then_pointer("", 12).rr_fixed(dns::rtype::A, ttl, 4).raw({192, 0, 2, last_octet});
    return b.bytes;
}

struct Delivery {
    uint64_t cookie;
    ResolveOutcome outcome;
};

struct RecordingSink final : CompletionSink {
    std::vector<Delivery> deliveries;
    void deliver(uint64_t cookie, const ResolveOutcome& outcome) override {
        deliveries.push_back({cookie, outcome});
    }
};

struct ResolverHarness {
    // `default_rule`: the "." rule's own options (transport, TTL caps); its domains and
    // upstreams are filled in here.
    explicit ResolverHarness(ResolverOptions options = {}, size_t upstream_count = 1,
                             std::optional<ForwardZone> default_rule = std::nullopt)
        : cache(cache::CacheConfig{.budget_bytes = size_t{1} << 20}),
          fakes(make_fakes(upstream_count)),
          routing(make_routing(std::move(default_rule))),
          queue(loop),
          shared{options, cache, {}, {&queue}},
          resolver(0, loop, shared, sink, counters, routing) {}

    std::shared_ptr<const Routing> make_routing(std::optional<ForwardZone> default_rule = {}) {
        Config c;
        for (const auto& a : addresses()) c.upstreams.push_back(a);
        if (default_rule) {
            default_rule->domains = {"."};
            default_rule->upstreams = c.upstreams;
            c.forwards.push_back(*default_rule);
        }
        c.forward_private_zones = true;  // the tests ask .test names only
        return Routing::build(c, registry);
    }

    static std::vector<std::unique_ptr<ManualUpstream>> make_fakes(size_t n) {
        std::vector<std::unique_ptr<ManualUpstream>> v;
        for (size_t i = 0; i < n; ++i) v.push_back(std::make_unique<ManualUpstream>());
        return v;
    }
    std::vector<SocketAddress> addresses() const {
        std::vector<SocketAddress> a;
        for (const auto& f : fakes) a.push_back(f->address);
        return a;
    }

    static Question question(std::string_view name, uint16_t qtype = dns::rtype::A) {
        Question q;
        dns::lower_name(dns::name_from_text(name)->view(), q.name);
        q.qtype = qtype;
        q.qclass = dns::kClassIN;
        return q;
    }

    // Turns the loop (draining this worker's queue into the sink) until `done` (called once
    // per turn) says true, or `turns` turns: 5 ms of the fake clock each, no real waiting
    // (what the manual upstream sends on loopback is readable when send() returns).
    template <typename Done>
    bool run_until(Done&& done, int turns = 400) {
        for (int i = 0; i < turns; ++i) {
            if (done()) return true;
            clock.advance_ms(5);
            loop.run_once(0, [this] { queue.drain(sink); });
        }
        return false;
    }

    ManualUpstream& fake(size_t i = 0) { return *fakes[i]; }

    cache::Cache cache;
    std::vector<std::unique_ptr<ManualUpstream>> fakes;
    UpstreamRegistry registry;
    std::shared_ptr<const Routing> routing;
    UpstreamSet& upstreams = *routing->rules()[0].upstreams;  // the default set
    nscache::testing::FakeClock clock;
    EventLoop loop{clock};
    CompletionQueue queue;
    ResolverShared shared;
    RecordingSink sink;
    WorkerCounters counters;
    Resolver resolver;
};

}  // namespace nscache::upstream::testing
