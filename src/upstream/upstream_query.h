// One question sent upstream, from first send to final answer. Each attempt goes out over UDP
// from a fresh socket (so a fresh random source port) with a fresh random ID; an answer is
// accepted only from that attempt's upstream address and port, with its ID and our question.
// After an attempt's wait (a few smoothed RTTs, doubling with every retry) the next attempt
// goes to the next upstream, but earlier attempts stay open: a slow upstream's late answer
// still counts. No address gets more than kMaxTriesPerServer queries per transport for one
// client query (RFC 9520 §3.1): after that it counts as unresponsive for this query and only
// the others are asked. TC=1 switches to TCP; the query deadline ends it all.
// Lives on one worker's event loop; internal to upstream/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/answer.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "dns/wire.h"
#include "upstream/failure_cache.h"
#include "upstream/question.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

class Resolver;
struct ResolverShared;

class UpstreamQuery final : public EventHandler {
  public:
    // RFC 9520 §3.1: a first try and two retries per server address and transport.
    static constexpr uint8_t kMaxTriesPerServer = 3;

    // `upstreams` are the servers this question goes to (the set its forwarding rule names).
    UpstreamQuery(Resolver& owner, EventLoop& loop, ResolverShared& shared, UpstreamSet& upstreams,
                  WorkerCounters& counters, const Question& question, std::string key);
    ~UpstreamQuery();

    void start();
    // TCP socket events (UDP attempts have handlers of their own).
    void on_event(uint32_t events) override;

    const Question& question() const { return question_; }
    // Holds what `upstreams` belongs to (a reload may retire it meanwhile), and whether the
    // answer may be cached (a [[forward]] rule with no-cache says no).
    void keep_alive(std::shared_ptr<const void> owner_of_set, bool cacheable) {
        set_owner_ = std::move(owner_of_set);
        cacheable_ = cacheable;
    }
    bool cacheable() const { return cacheable_; }
    // Why the query ended without an answer: timeouts, or only network errors.
    FailureReason failure_reason() const {
        return sent_any_ ? FailureReason::NoReachableAuthority : FailureReason::NetworkError;
    }
    const std::string& key() const { return key_; }

  private:
    // One UDP send and its socket.
    struct UdpAttempt final : EventHandler {
        UpstreamQuery* query = nullptr;
        int fd = -1;
        EventLoop::Registration registration = EventLoop::kNoRegistration;
        int upstream = -1;
        uint16_t id = 0;
        uint64_t sent_at_us = 0;

        void on_event(uint32_t) override { query->on_udp_readable(*this); }
    };

    void next_attempt();
    std::unique_ptr<UdpAttempt> send_udp(int upstream);
    void close_attempt(UdpAttempt& attempt);
    // Closes every open attempt; those to upstreams other than `answered_by` count as timeouts.
    void close_attempts(int answered_by);
    void on_udp_readable(UdpAttempt& attempt);
    void start_tcp(int upstream);
    void on_tcp_event(uint32_t events);
    void arm_timer(uint64_t wait_ms);
    // A message that passed the source, ID and question checks.
    void on_answer(dns::Bytes msg, int upstream, uint64_t sent_at_us, bool over_tcp);
    void close_tcp();
    // Ends the query; `this` is destroyed when it returns.
    void finish(std::shared_ptr<const cache::PreparedAnswer> answer, int answered_by);

    Resolver& owner_;
    EventLoop& loop_;
    ResolverShared& shared_;
    UpstreamSet& upstreams_;
    WorkerCounters& counters_;
    const Question question_;
    const std::string key_;

    // Bit i: upstream i has had its kMaxTriesPerServer UDP queries.
    uint64_t unresponsive_mask() const;

    std::vector<std::unique_ptr<UdpAttempt>> udp_;  // open attempts, oldest first
    uint64_t tried_ = 0;                            // bit i: upstream i tried in this round
    int attempts_ = 0;
    uint8_t udp_sent_[64] = {};  // queries per upstream address, this client query
    uint8_t tcp_sent_[64] = {};
    bool sent_any_ = false;  // a query left for some upstream (not only failed sends)
    std::shared_ptr<const void> set_owner_;
    bool cacheable_ = true;
    uint64_t deadline_ms_ = 0;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;

    // TCP (after TC=1): one exchange at a time.
    enum class TcpState { Idle, Connecting, Reading };
    TcpState tcp_state_ = TcpState::Idle;
    int tcp_fd_ = -1;
    EventLoop::Registration tcp_registration_ = EventLoop::kNoRegistration;
    int tcp_upstream_ = -1;
    uint16_t tcp_id_ = 0;
    std::vector<uint8_t> tcp_buffer_;
    size_t tcp_have_ = 0;

    // The last error answer (SERVFAIL, REFUSED...), relayed if no upstream does better.
    std::shared_ptr<const cache::PreparedAnswer> fallback_;
    int fallback_upstream_ = -1;
};

}  // namespace nscache::upstream
