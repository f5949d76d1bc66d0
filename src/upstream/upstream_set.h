// SPDX-License-Identifier: BSD-3-Clause
// The upstream servers and what we know of their health: smoothed RTT, consecutive failures,
// and whether they are marked down. Shared by all workers; every field is an atomic, so
// choosing an upstream takes no lock.
//
// Policy: send to the healthy upstream with the lowest smoothed RTT that this query has not
// tried yet. An upstream that times out kDownAfterFailures times in a row is marked down and
// skipped (a dead upstream costs clients one timeout, not one per query) until a background
// probe gets an answer from it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "config/address.h"
#include "upstream/tls_client.h"

namespace nscache::upstream {

inline constexpr uint32_t kDownAfterFailures = 3;
inline constexpr uint64_t kRttDecayMs = 10'000;

struct UpstreamServer {
    explicit UpstreamServer(const SocketAddress& a) : address(a), cleartext(a) {}
    explicit UpstreamServer(const UpstreamAddress& a);

    // Where queries go: ADDR:PORT, over UDP (TCP after TC=1), or over TLS when `tls`: DNS
    // over TLS, or DNS over HTTPS (HTTP/2 POSTs to `path`) when `https` too.
    const SocketAddress address;
    const bool tls = false;
    const bool https = false;
    const std::string path;  // https only
    TlsPeer tls_peer;        // what a TLS server must prove
    // Where UDP and TCP queries go: `address`, or port 53 of a tls:// upstream's address
    // (opportunistic mode's cleartext fallback). An https:// upstream never uses it: a DoH
    // server has no cleartext twin.
    const SocketAddress cleartext;
    const SocketAddress& udp_address() const { return cleartext; }

    // RFC 6298's estimators, from answers only: what the attempt waits are made of.
    std::atomic<uint32_t> srtt_us{0};  // 0: not measured yet
    std::atomic<uint32_t> rttvar_us{0};
    std::atomic<uint64_t> srtt_updated_ms{0};
    // What timeouts since the last answer say (it doubles with each, 0 after an answer):
    // weighs on the choice of server only, so one lost packet does not stretch every wait.
    std::atomic<uint32_t> penalty_us{0};
    std::atomic<uint32_t> consecutive_failures{0};
    std::atomic<bool> down{false};
    std::atomic<uint64_t> down_since_ms{0};  // for the log line when it answers again
    // For stats: queries sent (UDP and TCP), answers that matched the query, error answers
    // among those (SERVFAIL, REFUSED... or malformed), and attempts that timed out.
    std::atomic<uint64_t> queries{0};
    std::atomic<uint64_t> answers{0};
    std::atomic<uint64_t> errors{0};
    std::atomic<uint64_t> timeouts{0};
};

// For stats: what was asked of a set as a whole (of a forwarding rule, when rules choose
// sets). One question is one UpstreamQuery, however many attempts it makes.
struct UpstreamSetCounters {
    std::atomic<uint64_t> questions{0};
    std::atomic<uint64_t> failures{0};  // questions that ended with no answer from any server
};

class UpstreamSet {
  public:
    explicit UpstreamSet(const std::vector<SocketAddress>& addresses);
    // A set of servers that may also belong to other sets (or to the set a reload replaced):
    // their health goes with them.
    explicit UpstreamSet(std::vector<std::shared_ptr<UpstreamServer>> servers)
        : servers_(std::move(servers)) {}
    // `pins`: SPKI pins by address (RFC 7858 §4.2), for tls:// upstreams.
    explicit UpstreamSet(const std::vector<UpstreamAddress>& addresses,
                         const std::vector<SpkiPin>& pins = {});

    size_t size() const { return servers_.size(); }
    UpstreamServer& at(size_t i) { return *servers_[i]; }
    const UpstreamServer& at(size_t i) const { return *servers_[i]; }
    const std::shared_ptr<UpstreamServer>& shared(size_t i) const { return servers_[i]; }

    // The index to try next, skipping those whose bit is set in `tried`: healthy ones before
    // those marked down, the lowest smoothed RTT first. -1 when all were tried.
    // An RTT not refreshed for a while counts for less (it halves every kRttDecayMs), so an
    // upstream penalised by one lost packet is tried again and re-measured.
    int choose(uint64_t tried, uint64_t now_ms) const;
    bool all_down() const;

    // How long to wait for this upstream before trying the next: RFC 6298's RTO (SRTT + 4
    // RTTVAR) within bounds, as unbound's: a floor of 50 ms, so a lost packet on a fast path is
    // sent again soon, and a ceiling, so a dead one is left fast. The query doubles it with
    // each retry.
    uint32_t attempt_timeout_ms(size_t i) const;

    void record_answer(size_t i, uint32_t rtt_us, uint64_t now_ms);
    void record_timeout(size_t i, uint64_t now_ms);

    // A [[forward]] rule with transport = "tcp": its plain servers are asked over TCP only
    // (set once, before the set is shared).
    void set_tcp_only(bool tcp_only) { tcp_only_ = tcp_only; }
    bool tcp_only() const { return tcp_only_; }

    UpstreamSetCounters& counters() { return counters_; }
    const UpstreamSetCounters& counters() const { return counters_; }

  private:
    UpstreamSetCounters counters_;
    std::vector<std::shared_ptr<UpstreamServer>> servers_;
    bool tcp_only_ = false;
};

}  // namespace nscache::upstream
