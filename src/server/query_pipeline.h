// SPDX-License-Identifier: BSD-3-Clause
// What a worker does with each client query, whatever the transport: parse, check access,
// answer from the cache, or hand the miss to the resolver and answer when it delivers.
// The prefetch, serve-stale and failure-cache decisions are upstream/miss_path.h's, which the
// host lookup behind glibc takes alike; this adds the DNS-only parts (rendering for the
// client, the NXDOMAIN cut, the stale-answer timer). One per worker, used from its thread.
// Never re-entered by the forwarder: resolve() does not deliver from inside the call.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "cache/render.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "server/pending_clients.h"
#include "server/server_shared.h"
#include "server/settings.h"
#include "upstream/completion.h"
#include "upstream/forwarder.h"

namespace nscache::server {

struct ClientOrigin {
    Transport transport = Transport::Udp;
    uint16_t udp_socket = 0;
    uint64_t tcp_connection = 0;  // Tcp, Tls, Https: the connection's id
    uint32_t stream = 0;          // Https: the HTTP/2 stream
    const sockaddr* peer = nullptr;
    socklen_t peer_len = 0;
};

// Sends an answer that was not ready when the query came in.
class ReplySender {
  public:
    virtual void send_reply(const PendingClient& client, std::span<const uint8_t> reply) = 0;

  protected:
    ~ReplySender() = default;
};

struct HandleResult {
    size_t reply_length = 0;  // an answer written to `out` now
    bool pending = false;     // the answer comes later, through ReplySender
};

class QueryPipeline final : public upstream::CompletionSink {
  public:
    QueryPipeline(ServerShared& shared, EventLoop& loop, upstream::Forwarder& forwarder,
                  WorkerCounters& counters, ReplySender& sender, const Settings& settings);

    // Later queries use `settings` (which the caller keeps alive); the owning thread only.
    void apply(const Settings& settings) { settings_ = &settings; }

    // `out` must hold the transport's maximum answer (UDP: the configured EDNS size, at least
    // 512; TCP: 65535).
    HandleResult handle(dns::Bytes msg, const ClientOrigin& origin, std::span<uint8_t> out);

    void deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) override;

    // The clients waiting now (for tests and stats: their count, the ANY halves they hold).
    const PendingClients& pending() const { return pending_; }

  private:
    static bool encrypted(Transport t) { return t == Transport::Tls || t == Transport::Https; }
    // RFC 8467 §4.1: the answer to a padded query over an encrypted transport is padded too.
    static size_t padded(Transport transport, const dns::Edns& edns, std::span<uint8_t> out,
                         size_t length);
    // handle() before the padding.
    HandleResult answer(dns::Bytes msg, const ClientOrigin& origin, std::span<uint8_t> out);
    size_t error_answer(const dns::ParsedQuery& parsed, uint16_t rcode, std::span<uint8_t> out,
                        uint32_t ede = dns::kNoEde);
    // A query without RD (RFC 1034 §4.3.1): from the cache (clients in allow-snoop) or from
    // local data, never forwarded; REFUSED otherwise.
    HandleResult handle_norec(const dns::ParsedQuery& parsed, const ClientOrigin& origin,
                              uint64_t now, std::span<uint8_t> out);
    // Type ANY (RFC 8482 §4.1): the name's A and AAAA RRsets, from the cache or asked upstream.
    HandleResult handle_any(const dns::ParsedQuery& parsed, const ClientOrigin& origin,
                            uint64_t now, std::span<uint8_t> out);
    void deliver_any(uint64_t cookie, PendingClient& client,
                     const upstream::ResolveOutcome& outcome);
    // What a question that missed the cache meets before it is asked upstream, for a plain
    // query and for each half of an ANY alike: serve-stale at once (serve-expired, or every
    // upstream down), the NXDOMAIN cut (RFC 8020), the failure cache (RFC 9520 §3.2).
    struct MissCheck {
        enum class Kind : uint8_t { Ask, Answered, Failing };
        Kind kind = Kind::Ask;
        size_t length = 0;                 // Answered: the answer rendered into `out`
        upstream::FailureReason reason{};  // Failing: why
    };
    MissCheck check_miss(const upstream::Question& question, const cache::CacheKey& key,
                         const dns::Query& q, uint64_t now, const cache::RenderLimits& limits,
                         bool stale_available, std::span<uint8_t> out);
    // A waiting client for `q`, asked upstream as `question`; nullptr when the table is full.
    PendingClient* add_pending(const dns::Query& q, const ClientOrigin& origin,
                               const upstream::Question& question, uint64_t& cookie);
    cache::RenderLimits limits_for(Transport transport, const dns::Query& q) const;
    void on_stale_timer(uint64_t cookie);
    // Renders a stale entry for a waiting client into scratch_; 0 when there is none.
    size_t render_stale(const PendingClient& client);
    // The time from reading `client`'s query to now, in the histogram of `source`.
    void record_latency(AnswerSource source, const PendingClient& client);

    ServerShared& shared_;
    const Settings* settings_;
    EventLoop& loop_;
    upstream::Forwarder& forwarder_;
    WorkerCounters& counters_;
    ReplySender& sender_;
    PendingClients pending_;
    std::vector<uint8_t> scratch_;  // answers rendered for delivery
    // The A and AAAA answers of an ANY query, rendered for it, while it is answered.
    std::vector<uint8_t> any_parts_[2];
};

}  // namespace nscache::server
