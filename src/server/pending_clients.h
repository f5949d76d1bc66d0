// SPDX-License-Identifier: BSD-3-Clause
// Clients waiting for an upstream answer, on one worker: what is needed to answer each later
// (where it is, and its query's ID, bits, question and EDNS). Used only from the owning
// worker's thread.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include "common/event_loop.h"
#include "common/slot_table.h"
#include "dns/query.h"
#include "upstream/question.h"

namespace nscache::server {

// Tls: DNS over TLS (RFC 7858), a TcpConnection with TLS; Https: DNS over HTTPS (RFC 8484),
// one HTTP/2 stream of an HttpsConnection. Both answer as TCP does (65535-byte answers).
enum class Transport : uint8_t { Udp, Tcp, Tls, Https };

struct PendingClient {
    Transport transport = Transport::Udp;
    uint16_t udp_socket = 0;      // index of the worker's UDP socket the query came in on
    uint64_t tcp_connection = 0;  // Tcp, Tls: the TcpConnections id; Https: HttpsConnections'
    uint32_t stream = 0;          // Https: the HTTP/2 stream the answer goes on
    sockaddr_in6 peer{};          // large enough for IPv4 and IPv6
    socklen_t peer_len = 0;

    dns::Header header;
    dns::Edns edns;
    uint8_t question[dns::kMaxNameLength + 4];
    uint16_t question_len = 0;
    upstream::Question upstream_question;
    EventLoop::TimerHandle stale_timer = EventLoop::kNoTimer;
    uint64_t arrived_us = 0;  // the loop's time when the query was read, for its latency

    // A query for ANY, answered with the name's A and AAAA RRsets (RFC 8482 §4.1) asked as two
    // questions: while both are asked, each waits in its own slot and names the other's;
    // the first answer goes into the other's `any_other`, and the second completes the reply.
    static constexpr uint64_t kNoPartner = ~uint64_t{0};
    uint64_t any_partner = kNoPartner;
    bool any_other_known = false;  // any_other holds the other question's answer
    // Rendered for the client's ANY query; empty: it failed (or was not held, see
    // PendingClients::hold_any_other). Set only through PendingClients, which counts it.
    std::vector<uint8_t> any_other;

    // A view of the client's query, pointing into this slot.
    dns::Query query() const {
        dns::Query q;
        q.header = header;
        q.edns = edns;
        q.question = dns::Bytes(question, question_len);
        q.qname = dns::Bytes(question, question_len - 4u);
        q.qtype = dns::read_u16(question + question_len - 4);
        q.qclass = dns::read_u16(question + question_len - 2);
        return q;
    }
};

// The clients of one worker waiting for an upstream answer, addressed by cookies (SlotTable
// ids): a late answer for a client since answered some other way finds nothing.
// Memory: at most kMaxPending slots, plus the ANY halves held for them, at most
// kMaxAnyHeldBytes in all.
class PendingClients {
  public:
    static constexpr size_t kMaxPending = 16384;
    // What the ANY clients of one worker may hold of answers already known while they wait
    // for the other half. Each half may be a 64 KiB TCP answer, so without a bound 16,384
    // waiters could pin a gigabyte (an attacker's name with 3,000 A records, its AAAA
    // dropped: 8,000 queries took 400 MB). 4 MiB holds thousands of usual halves; past it a
    // client gets the half it has at once, a subset RFC 8482 §4.1 allows.
    static constexpr size_t kMaxAnyHeldBytes = size_t{4} << 20;

    PendingClients() : table_(kMaxPending) {}

    // A fresh slot and its cookie; nullptr when kMaxPending clients are waiting already.
    PendingClient* add(uint64_t& cookie) { return table_.add(cookie); }
    PendingClient* find(uint64_t cookie) { return table_.find(cookie); }
    void remove(uint64_t cookie) {
        if (PendingClient* c = table_.find(cookie)) any_held_bytes_ -= c->any_other.size();
        table_.remove(cookie);
    }
    size_t size() const { return table_.size(); }

    // Whether `bytes` more may be held.
    bool can_hold_any(size_t bytes) const { return any_held_bytes_ + bytes <= kMaxAnyHeldBytes; }
    // Keeps `answer` as `client`'s other ANY half (any_other_known set); false, and nothing
    // kept, when that would take the held halves past kMaxAnyHeldBytes.
    bool hold_any_other(PendingClient& client, std::span<const uint8_t> answer) {
        const size_t before = client.any_other.size();
        if (any_held_bytes_ - before + answer.size() > kMaxAnyHeldBytes) return false;
        client.any_other.assign(answer.begin(), answer.end());
        any_held_bytes_ = any_held_bytes_ - before + answer.size();
        client.any_other_known = true;
        return true;
    }
    // The other half failed: nothing held, any_other_known set.
    void any_other_failed(PendingClient& client) {
        any_held_bytes_ -= client.any_other.size();
        client.any_other = {};
        client.any_other_known = true;
    }
    size_t any_held_bytes() const { return any_held_bytes_; }

  private:
    SlotTable<PendingClient> table_;
    size_t any_held_bytes_ = 0;
};

}  // namespace nscache::server
