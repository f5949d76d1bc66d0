// SPDX-License-Identifier: BSD-3-Clause
// One thread's client of the shared second-level cache in Redis or Redis Cluster: looks a
// local cache miss up there, and writes upstream answers there for the other hosts. One per
// Resolver (each worker and the host front's thread), on that thread's event loop; no locks,
// nothing shared but the settings and the thread's own counters block.
//
// Guarantees
// - Never blocks: hiredis's asynchronous API on the thread's EventLoop (RedisConnection), and
//   lookup() never delivers from inside the call.
// - Bounded: at most `max-inflight` requests outstanding; each lookup waits at most `timeout`;
//   what a value may hold is bounded on the wire (GETRANGE) and judged by decode_value.
// - A fault never becomes a DNS fault: a lookup that fails in any way is a miss, which the
//   caller takes upstream. After three failures in a row a node is marked down for every
//   thread (TierHealth): lookups skip it at once (no waiting) and one thread's PING probes it
//   once a second until it answers.
// - Redis Cluster: keys are routed by hash slot from CLUSTER SLOTS (refreshed after a MOVED
//   or a node going down, at most once a second), MOVED and ASK are followed up to twice per
//   request within its timeout.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "cache/answer.h"
#include "cache/cache.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "config/config.h"
#include "dns/name.h"
#include "sharedcache/redis_connection.h"
#include "sharedcache/tier_health.h"

namespace nscache::sharedcache {

// Implemented by the Resolver: the outcome of one lookup().
class LookupSink {
  public:
    // `answer`: the tier's answer, TTLs counted down to now; null for a miss of any kind.
    virtual void shared_lookup_done(uint64_t token,
                                    std::shared_ptr<const cache::PreparedAnswer> answer) = 0;

  protected:
    ~LookupSink() = default;
};

class SharedTier final : public RedisConnection::Listener {
  public:
    // `config` and `ttl` are read for the tier's whole life (`ttl` may change in between, on
    // this thread: a reload).
    SharedTier(EventLoop& loop, const SharedCacheConfig& config, const cache::TtlPolicy& ttl,
               TierHealth& health, WorkerCounters& counters, LookupSink& sink);
    ~SharedTier();
    SharedTier(const SharedTier&) = delete;
    SharedTier& operator=(const SharedTier&) = delete;

    // Asks the tier for `key`. True: exactly one shared_lookup_done(token, ...) follows, from
    // the loop, within the timeout. False: the tier was not asked (down, full, no route);
    // nothing follows and the caller goes upstream at once. `refresh`: see decode_value.
    // `view`: the forwarding rule's domain, empty for the default one (see shared_key).
    bool lookup(const cache::CacheKey& key, uint64_t token, bool refresh,
                std::string_view view = {});

    // Writes an answer fresh from upstream (cacheable, not SERVFAIL), in the background:
    // SET with PX = its TTL. Does nothing with write = false, or when the tier is down or full.
    void store(const cache::CacheKey& key, const cache::PreparedAnswer& answer,
               std::string_view view = {});

    size_t outstanding() const { return requests_.size(); }

    void on_reply(RedisConnection& connection, uint64_t token, const redisReply* reply) override;

  private:
    struct Node {
        RedisEndpoint endpoint;
        NodeHealth* health = nullptr;                 // shared with the other threads
        std::unique_ptr<RedisConnection> connection;  // this thread's
        bool probing = false;                         // this thread's PING is out

        bool down() const { return health->down.load(std::memory_order_relaxed); }
    };

    enum class Kind : uint8_t { Get, Set, Auth, Asking, Ping, Slots };

    struct Request {
        Kind kind = Kind::Get;
        int node = -1;
        uint8_t redirects = 0;
        bool refresh = false;
        uint64_t token = 0;  // the sink's (Get)
        uint64_t sent_us = 0;
        uint64_t epoch = 0;          // the node's health epoch when sent
        std::string key;             // Get, Set
        std::vector<uint8_t> value;  // Set
        uint64_t ttl_ms = 0;         // Set
        dns::NameBuffer name;        // Get: the question, to judge the value by
        uint16_t qtype = 0;
        uint16_t qclass = 0;
        uint8_t flags = 0;
    };
    using RequestId = SlotTable<Request>::Id;

    // The node `key` lives on (cluster: by slot; any node while the slot is unknown), or -1.
    int route(const std::string& key) const;
    // The node at `endpoint`, added if new; -1 past TierHealth::kMaxNodes.
    int node_index(const RedisEndpoint& endpoint);
    // Opens the node's connection if needed (with AUTH); false when it cannot take commands.
    bool ready(int node);
    // Sends the request's command to `node` (ASKING first for an ASK redirection).
    bool send(RequestId id, Request& r, int node, bool asking);
    // A request that must get a reply within the timeout.
    void watch(RequestId id);
    void on_deadlines();

    void on_get_reply(RequestId id, Request& r, const redisReply* reply, bool closed_by_us);
    void on_set_reply(RequestId id, Request& r, const redisReply* reply, bool closed_by_us);
    // A request that got no reply because its connection ended: a failure of the node, unless
    // we ended it (another request on it timed out), which says nothing of the node.
    void connection_lost(const Request& r, bool closed_by_us);
    enum class Redirected : uint8_t { No, Followed, Unfollowable };
    // Follows MOVED or ASK (cluster only).
    Redirected follow_redirect(RequestId id, Request& r, const redisReply& reply);
    // Ends a Get: removes it, then tells the sink (which may call back into us).
    void finish_get(RequestId id, std::shared_ptr<const cache::PreparedAnswer> answer);

    void node_ok(int node, uint64_t epoch);
    // Counts a failure of a request sent at `epoch`; when the node is down (now or already),
    // this thread's connection to it is closed: requests still on it fail now, not each at
    // its timeout. Never call it where a reply must not be delivered (inside lookup()).
    void node_failed(int node, uint64_t epoch);
    void probe_down_nodes();
    void refresh_slots();
    void apply_slots(const redisReply& reply);

    EventLoop& loop_;
    const SharedCacheConfig& config_;
    const cache::TtlPolicy& ttl_;  // the Resolver's, which a reload updates
    TierHealth& health_;
    WorkerCounters& counters_;
    LookupSink& sink_;
    const bool cluster_;
    const std::string max_value_index_;  // GETRANGE's end

    std::vector<std::unique_ptr<Node>> nodes_;
    std::vector<int16_t> slots_;  // cluster: hash slot -> node index, -1 unknown
    uint64_t slots_refreshed_ms_ = 0;
    bool slots_pending_ = false;

    SlotTable<Request> requests_;
    // (deadline, id) in the order sent: one timeout for all requests makes deadlines come in
    // order, so one timer serves them all. Ids already answered are skipped.
    std::deque<std::pair<uint64_t, RequestId>> deadlines_;
    EventLoop::TimerHandle deadline_timer_ = EventLoop::kNoTimer;
    EventLoop::TimerHandle probe_timer_ = EventLoop::kNoTimer;
};

}  // namespace nscache::sharedcache
