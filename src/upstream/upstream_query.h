// SPDX-License-Identifier: BSD-3-Clause
// One question sent upstream, from first send to final answer. Each attempt goes out over UDP
// from a socket of the worker's pool that no other query holds (so its own random source
// port) with a fresh random ID; an answer is accepted only from that attempt's upstream
// address and port, with its ID and our question.
// After an attempt's wait (a few smoothed RTTs, doubling with every retry) the next attempt
// goes to the next upstream, but earlier attempts stay open: a slow upstream's late answer
// still counts. No address gets more than kMaxTriesPerServer queries per transport for one
// client query (RFC 9520 §3.1): after that it counts as unresponsive for this query and only
// the others are asked; when every server had its UDP tries, each is asked once over TCP
// (issue 16 item 11: loss on the path, not a dead server, is the likely cause). TC=1 switches
// to TCP on the worker's connection to that server
// (kept open and pipelined, RFC 7766); a tls:// upstream is asked over the worker's TLS
// connection to it instead of UDP (opportunistic mode: over UDP while that connection cannot
// be made), an https:// upstream over the worker's HTTP/2 connection to it (never over UDP, in
// any mode: a DoH server has no cleartext twin). The query deadline ends it all.
// Lives on one worker's event loop; internal to upstream/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cache/answer.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "dns/wire.h"
#include "upstream/cookie_jar.h"
#include "upstream/failure_cache.h"
#include "upstream/question.h"
#include "upstream/stream_pool.h"
#include "upstream/udp_socket_pool.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

class UpstreamQuery;

// The Resolver's options an UpstreamQuery reads (as they are now: a reload's apply changes
// them for the queries in flight too).
struct QueryOptions {
    uint32_t query_timeout_ms = 2000;
    TlsAuth tls_auth = TlsAuth::Strict;
    bool upstream_cookies = true;
    uint16_t edns_buffer_size = 1232;
    cache::TtlPolicy ttl;
};

// What an UpstreamQuery needs of the worker that owns it (the Resolver): its sockets, its
// options, and to be told when the query is done. An interface, so that this file and
// resolver.h do not include each other.
class QueryOwner {
  public:
    virtual const QueryOptions& query_options() const = 0;
    virtual UdpSocketPool& udp_pool() = 0;
    virtual CookieJar& cookies() = 0;
    virtual StreamPool& streams() = 0;
    // The query is done; destroys it.
    virtual void finished(UpstreamQuery* query,
                          std::shared_ptr<const cache::PreparedAnswer> answer) = 0;

  protected:
    ~QueryOwner() = default;
};

class UpstreamQuery final : public MessageStream::Waiter {
  public:
    // RFC 9520 §3.1: a first try and two retries per server address and transport.
    static constexpr uint8_t kMaxTriesPerServer = 3;

    // `upstreams` are the servers this question goes to (the set its forwarding rule names).
    // `question` has its name_hash set: the cache insert and the failure cache read it.
    UpstreamQuery(QueryOwner& owner, EventLoop& loop, UpstreamSet& upstreams,
                  WorkerCounters& counters, const Question& question);
    ~UpstreamQuery();

    void start();
    // MessageStream::Waiter: the TCP, TLS or HTTPS exchange.
    void on_stream_answer(dns::Bytes msg, uint32_t rtt_us) override;
    void on_stream_failed() override;
    // A DoH server's HTTP 429 or 5xx: a failure of that server as a timeout is (its health
    // and choice), and the next server is asked at once.
    void on_stream_refused() override;

    const Question& question() const { return question_; }
    // Holds what `upstreams` belongs to (a reload may retire it meanwhile), whether the
    // answer may be cached (a [[forward]] rule with no-cache says no), and the rule's view of
    // the shared tier (a string the owner keeps alive; see sharedcache::shared_key).
    void keep_alive(std::shared_ptr<const void> owner_of_set, bool cacheable,
                    std::string_view shared_view) {
        set_owner_ = std::move(owner_of_set);
        cacheable_ = cacheable;
        shared_view_ = shared_view;
    }
    // The rule's own caps on what its answers are cached for (ForwardRule), applied over the
    // Resolver's TtlPolicy as it is when the answer comes: the smaller wins.
    void cap_ttls(uint32_t max_ttl, uint32_t negative_max_ttl) {
        max_ttl_cap_ = max_ttl;
        negative_max_ttl_cap_ = negative_max_ttl;
    }
    std::string_view shared_view() const { return shared_view_; }
    bool cacheable() const { return cacheable_; }
    const void* set_owner() const { return set_owner_.get(); }
    // Why the query ended without an answer: timeouts, or only network errors.
    FailureReason failure_reason() const {
        return sent_any_ ? FailureReason::NoReachableAuthority : FailureReason::NetworkError;
    }

  private:
    // One UDP send and the pool socket it holds until answered or given up.
    struct UdpAttempt final : UdpSocketPool::Receiver {
        UpstreamQuery* query = nullptr;
        UdpSocketPool::Socket* socket = nullptr;
        int upstream = -1;
        uint16_t id = 0;
        ClientCookie cookie;       // what the query carried (RFC 7873): the answer must echo it
        bool cookie_sent = false;  // false: cookies off, or a server that refuses them
        uint64_t sent_at_us = 0;

        void on_readable() override { query->on_udp_readable(*this); }
    };

    void next_attempt();
    // The rest of an attempt, once `upstream` is chosen.
    void send_attempt(int upstream);
    // The servers' main transport is a stream: tls://, or every server of a tcp-only set.
    bool stream_first(int upstream) const;
    // send_attempt's TCP for a tcp-only set (its attempts count as UDP ones do).
    void send_tcp_attempt(int upstream);
    // What the COOKIE option of `msg` (scanned into tls_scan) says of it.
    CookieVerdict check_cookie(dns::Bytes msg, const SocketAddress& from,
                               const UdpAttempt& attempt);
    // Sends attempt `attempt` (a free slot of udp_) to `upstream`; false if it could not.
    bool send_udp(int upstream, UdpAttempt& attempt);
    // Hands the attempt's socket back: reusable when `answered`, closed otherwise.
    void close_attempt(UdpAttempt& attempt, bool answered = false);
    // Closes every open attempt; those to upstreams other than `answered_by` count as timeouts.
    void close_attempts(int answered_by);
    void on_udp_readable(UdpAttempt& attempt);
    void start_tcp(int upstream);
    // After every server's UDP tries timed out: asks the next server not yet asked over TCP
    // (UDP attempts stay open). False when there is none.
    bool start_tcp_after_timeouts();
    // Sends over `connection` (replacing any stream attempt still open); false if it is full.
    bool send_stream(int upstream, MessageStream& connection, bool tls);
    // Gives up the stream attempt, if any; a TLS one not answered counts as a timeout.
    void cancel_stream(int answered_by);
    void arm_timer(uint64_t wait_ms);
    // A message that passed the source, ID and question checks. `stream`: the connection
    // it came on (null for UDP).
    // `scanned`: scan_response already filled tls_scan from `msg`. `cookie_sent`: the UDP
    // query it answers carried a COOKIE option.
    void on_answer(dns::Bytes msg, int upstream, MessageStream* stream, bool scanned = false,
                   bool cookie_sent = false);
    // Ends the query; `this` is destroyed when it returns.
    void finish(std::shared_ptr<const cache::PreparedAnswer> answer, int answered_by);

    QueryOwner& owner_;
    EventLoop& loop_;
    UpstreamSet& upstreams_;
    WorkerCounters& counters_;
    const Question question_;

    // Bit i: upstream i has had its kMaxTriesPerServer UDP queries.
    uint64_t unresponsive_mask() const;

    // UDP attempts listened to at once; the oldest is given up when a fifth goes out. A ring
    // in place (the pool's sockets point at their attempt, so attempts never move), oldest
    // at udp_head_: no allocation per attempt.
    static constexpr size_t kMaxOpenAttempts = 4;
    UdpAttempt udp_[kMaxOpenAttempts];
    size_t udp_head_ = 0;
    size_t udp_count_ = 0;
    UdpAttempt& udp_at(size_t k) { return udp_[(udp_head_ + k) % kMaxOpenAttempts]; }
    uint64_t tried_ = 0;  // bit i: upstream i tried in this round
    int attempts_ = 0;
    // Queries per upstream address and transport, this client query: UDP (or TLS for a
    // tls:// upstream), and TCP after TC=1.
    uint8_t udp_sent_[64] = {};
    uint8_t tcp_sent_[64] = {};
    bool badcookie_retried_ = false;   // RFC 7873 §5.3: one retry after BADCOOKIE
    bool formerr_retried_ = false;     // one retry without the cookie after FORMERR
    int formerr_retry_upstream_ = -1;  // the server that retry went to (sent no cookie since)
    bool cookie_missing_ = false;      // an answer dropped for leaving out an expected cookie
    bool sent_any_ = false;            // a query left for some upstream (not only failed sends)
    std::shared_ptr<const void> set_owner_;
    std::string_view shared_view_;
    bool cacheable_ = true;
    uint32_t max_ttl_cap_ = kNoTtlCap;
    uint32_t negative_max_ttl_cap_ = kNoTtlCap;
    uint64_t deadline_ms_ = 0;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;

    // The exchange over a worker's TCP, TLS or HTTPS connection: one at a time.
    MessageStream* stream_ = nullptr;
    uint16_t stream_id_ = 0;
    int stream_upstream_ = -1;
    bool stream_tls_ = false;
    bool stream_after_timeouts_ = false;  // a TCP query because every UDP try timed out

    // The last error answer (SERVFAIL, REFUSED...), relayed if no upstream does better.
    std::shared_ptr<const cache::PreparedAnswer> fallback_;
    int fallback_upstream_ = -1;
};

}  // namespace nscache::upstream
