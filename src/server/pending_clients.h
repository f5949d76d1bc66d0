// Clients waiting for an upstream answer, on one worker: what is needed to answer each later
// (where it is, and its query's ID, bits, question and EDNS). A slab of slots addressed by
// cookies that carry a generation, so a late answer for a slot since reused is ignored.
// Used only from the owning worker's thread.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "common/event_loop.h"
#include "dns/query.h"
#include "upstream/question.h"

namespace nscache::server {

enum class Transport : uint8_t { Udp, Tcp };

struct PendingClient {
    Transport transport = Transport::Udp;
    uint16_t udp_socket = 0;  // index of the worker's UDP socket the query came in on
    uint64_t tcp_connection = 0;
    sockaddr_in6 peer{};  // large enough for IPv4 and IPv6
    socklen_t peer_len = 0;

    dns::Header header;
    dns::Edns edns;
    uint8_t question[dns::kMaxNameLength + 4];
    uint16_t question_len = 0;
    upstream::Question upstream_question;
    EventLoop::TimerHandle stale_timer = EventLoop::kNoTimer;

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

class PendingClients {
  public:
    static constexpr size_t kMaxPending = 16384;

    // nullptr when full.
    PendingClients() { slots_.reserve(kMaxPending); }  // slot pointers stay valid

    PendingClient* add(uint64_t& cookie) {
        uint32_t slot;
        if (!free_.empty()) {
            slot = free_.back();
            free_.pop_back();
        } else if (slots_.size() < kMaxPending) {
            slot = static_cast<uint32_t>(slots_.size());
            slots_.emplace_back();
        } else {
            return nullptr;
        }
        Slot& s = slots_[slot];
        s.in_use = true;
        s.client.stale_timer = EventLoop::kNoTimer;  // the caller sets every other field
        cookie = uint64_t{s.generation} << 32 | slot;
        return &s.client;
    }

    PendingClient* find(uint64_t cookie) {
        const auto slot = static_cast<uint32_t>(cookie);
        if (slot >= slots_.size()) return nullptr;
        Slot& s = slots_[slot];
        if (!s.in_use || s.generation != static_cast<uint32_t>(cookie >> 32)) return nullptr;
        return &s.client;
    }

    void remove(uint64_t cookie) {
        const auto slot = static_cast<uint32_t>(cookie);
        Slot& s = slots_[slot];
        s.in_use = false;
        ++s.generation;
        free_.push_back(slot);
    }

  private:
    struct Slot {
        PendingClient client;
        uint32_t generation = 0;
        bool in_use = false;
    };
    std::vector<Slot> slots_;
    std::vector<uint32_t> free_;
};

}  // namespace nscache::server
