// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/shared_tier.h"

#include <cstring>
#include <string_view>

#include "common/clock.h"
#include "common/log.h"
#include "sharedcache/cluster_slots.h"
#include "sharedcache/shared_value.h"

namespace nscache::sharedcache {
namespace {

// Redirections followed per request (one MOVED, then one ASK during a migration).
constexpr uint8_t kMaxRedirects = 2;
constexpr uint64_t kSlotsRefreshIntervalMs = 1000;

std::string_view text_of(const redisReply& reply) {
    return std::string_view(reply.str != nullptr ? reply.str : "", reply.len);
}

}  // namespace

SharedTier::SharedTier(EventLoop& loop, const SharedCacheConfig& config,
                       const cache::TtlPolicy& ttl, TierHealth& health, WorkerCounters& counters,
                       LookupSink& sink)
    : loop_(loop),
      config_(config),
      ttl_(ttl),
      health_(health),
      counters_(counters),
      sink_(sink),
      cluster_(!config.redis_cluster.empty()),
      max_value_index_(std::to_string(kMaxValueBytes)) {
    if (config.redis) node_index(*config.redis);
    for (const SocketAddress& seed : config.redis_cluster) node_index(RedisEndpoint{seed, {}});
    if (cluster_) slots_.assign(kClusterSlots, -1);
    // Nothing is connected here (this may run before the loop's thread starts): the first
    // lookup connects, and the first MOVED loads the slot map.
    probe_timer_ = loop_.add_timer(loop_.now_ms() + NodeHealth::kProbeIntervalMs, [this] {
        probe_timer_ = EventLoop::kNoTimer;
        probe_down_nodes();
    });
}

SharedTier::~SharedTier() {
    loop_.cancel_timer(deadline_timer_);
    loop_.cancel_timer(probe_timer_);
    nodes_.clear();  // frees the connections; they call nothing back while they go
}

int SharedTier::route(const std::string& key) const {
    if (!cluster_) return nodes_.empty() ? -1 : 0;
    const int16_t known = slots_[key_slot(key)];
    if (known >= 0) return known;
    // Slot not known yet: any node that is up answers MOVED with the right one.
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (!nodes_[i]->down()) return static_cast<int>(i);
    }
    return -1;
}

int SharedTier::node_index(const RedisEndpoint& endpoint) {
    const std::string name = endpoint.to_string();
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i]->health->name == name) return static_cast<int>(i);
    }
    // MOVED, ASK and CLUSTER SLOTS name nodes: what a server says grows no table unbounded.
    NodeHealth* health = health_.node(name);
    if (health == nullptr) return -1;
    nodes_.push_back(std::make_unique<Node>());
    nodes_.back()->endpoint = endpoint;
    nodes_.back()->health = health;
    return static_cast<int>(nodes_.size() - 1);
}

bool SharedTier::ready(int index) {
    Node& node = *nodes_[static_cast<size_t>(index)];
    if (!node.connection) node.connection = std::make_unique<RedisConnection>(loop_, *this);
    RedisConnection& connection = *node.connection;
    if (connection.usable()) return connection.pending() < config_.max_inflight;
    if (!connection.idle()) return false;  // hiredis is still tearing the last one down
    if (!connection.open(node.endpoint)) {
        if (!node.down()) bump(counters_.shared_errors);  // a failed probe is no news
        // The connection is idle: closing it calls nothing back, even from inside lookup().
        node_failed(index, node.health->epoch.load(std::memory_order_relaxed));
        return false;
    }
    if (!config_.password.empty()) {
        RequestId id;
        Request* auth = requests_.add(id);
        auth->kind = Kind::Auth;
        auth->node = index;
        const bool sent =
            config_.user.empty()
                ? connection.command({"AUTH", config_.password}, id, RedisConnection::kStatusReply)
                : connection.command({"AUTH", config_.user, config_.password}, id,
                                     RedisConnection::kStatusReply);
        if (!sent) requests_.remove(id);
    }
    return true;
}

bool SharedTier::send(RequestId id, Request& r, int node, bool asking) {
    if (!ready(node)) return false;
    Node& n = *nodes_[static_cast<size_t>(node)];
    RedisConnection& connection = *n.connection;
    if (asking) {
        // The importing node takes the next command for a slot it does not own yet only
        // after ASKING (the Redis Cluster specification's migration protocol).
        RequestId asking_id;
        Request* a = requests_.add(asking_id);
        a->kind = Kind::Asking;
        a->node = node;
        if (!connection.command({"ASKING"}, asking_id, RedisConnection::kStatusReply)) {
            requests_.remove(asking_id);
            return false;
        }
    }
    bool sent = false;
    if (r.kind == Kind::Get) {
        // GETRANGE, not GET: at most kMaxValueBytes + 1 bytes come back, whatever is stored.
        sent = connection.command({"GETRANGE", r.key, "0", max_value_index_}, id,
                                  RedisConnection::kStringReply);
    } else if (r.kind == Kind::Set) {
        const std::string px = std::to_string(r.ttl_ms);
        const std::string_view value(reinterpret_cast<const char*>(r.value.data()), r.value.size());
        sent =
            connection.command({"SET", r.key, value, "PX", px}, id, RedisConnection::kStatusReply);
    }
    if (sent) {
        r.node = node;
        r.epoch = n.health->epoch.load(std::memory_order_relaxed);
    }
    return sent;
}

void SharedTier::watch(RequestId id) {
    // The loop's clock, as the timer that checks it (a fake one in tests).
    deadlines_.emplace_back(loop_.now_ms() + config_.timeout_ms, id);
    if (deadline_timer_ != EventLoop::kNoTimer) return;
    deadline_timer_ = loop_.add_timer(deadlines_.front().first, [this] {
        deadline_timer_ = EventLoop::kNoTimer;
        on_deadlines();
    });
}

void SharedTier::on_deadlines() {
    const uint64_t now = loop_.now_ms();
    while (!deadlines_.empty() && deadlines_.front().first <= now) {
        const RequestId id = deadlines_.front().second;
        deadlines_.pop_front();
        Request* r = requests_.find(id);
        if (r == nullptr) continue;  // answered in time
        const Kind kind = r->kind;
        const int node = r->node;
        const uint64_t token = r->token;
        const uint64_t epoch = r->epoch;
        // Gone before anything below can close the connection and call back for it.
        requests_.remove(id);
        bump(counters_.shared_timeouts);
        Node& n = *nodes_[static_cast<size_t>(node)];
        if (kind == Kind::Get || kind == Kind::Set) node_failed(node, epoch);
        if (kind == Kind::Ping) n.probing = false;
        if (kind == Kind::Slots) slots_pending_ = false;
        // A reply past its deadline would still be read, and behind it every later one: a
        // server trickling one endless reply held the connection (and all hiredis had parsed
        // of it) while each timeout counted only one failure of the three that mark the node
        // down. Dropped, the requests still on it fail now (no failure of the node: that was
        // this one) and the next one starts afresh.
        if (n.connection) n.connection->close();
        if (kind == Kind::Get) sink_.shared_lookup_done(token, nullptr);
    }
    if (!deadlines_.empty() && deadline_timer_ == EventLoop::kNoTimer) {
        deadline_timer_ = loop_.add_timer(deadlines_.front().first, [this] {
            deadline_timer_ = EventLoop::kNoTimer;
            on_deadlines();
        });
    }
}

bool SharedTier::lookup(const cache::CacheKey& key, uint64_t token, bool refresh,
                        std::string_view view) {
    if (requests_.size() >= config_.max_inflight) {
        bump(counters_.shared_skipped);
        return false;
    }
    std::string redis_key = shared_key(config_.key_prefix, key, view);
    const int node = route(redis_key);
    if (node < 0 || nodes_[static_cast<size_t>(node)]->down()) {
        bump(counters_.shared_skipped);
        return false;
    }
    RequestId id;
    Request* r = requests_.add(id);
    r->kind = Kind::Get;
    r->token = token;
    r->refresh = refresh;
    r->key = std::move(redis_key);
    std::memcpy(r->name.bytes, key.name.data(), key.name.size());
    r->name.length = static_cast<uint8_t>(key.name.size());
    r->qtype = key.qtype;
    r->qclass = key.qclass;
    r->flags = key.flags;
    r->sent_us = monotonic_us();
    if (!send(id, *r, node, false)) {
        requests_.remove(id);
        bump(counters_.shared_skipped);
        return false;
    }
    watch(id);
    bump(counters_.shared_lookups);
    return true;
}

void SharedTier::store(const cache::CacheKey& key, const cache::PreparedAnswer& answer,
                       std::string_view view) {
    if (!config_.write || answer.ttl == 0 || answer.kind == cache::AnswerKind::ServFail) return;
    if (requests_.size() >= config_.max_inflight) {
        bump(counters_.shared_writes_dropped);
        return;
    }
    std::string redis_key = shared_key(config_.key_prefix, key, view);
    const int node = route(redis_key);
    if (node < 0 || nodes_[static_cast<size_t>(node)]->down()) {
        bump(counters_.shared_writes_dropped);
        return;
    }
    std::vector<uint8_t> value = encode_value(key, answer, wall_ms());
    if (value.empty()) return;
    RequestId id;
    Request* r = requests_.add(id);
    r->kind = Kind::Set;
    r->key = std::move(redis_key);
    r->value = std::move(value);
    r->ttl_ms = uint64_t{answer.ttl} * 1000;
    r->sent_us = monotonic_us();
    if (!send(id, *r, node, false)) {
        requests_.remove(id);
        bump(counters_.shared_writes_dropped);
        return;
    }
    watch(id);
    bump(counters_.shared_writes);
}

void SharedTier::on_reply(RedisConnection& connection, uint64_t token, const redisReply* reply) {
    Request* r = requests_.find(token);
    if (r == nullptr) return;  // timed out already
    const int node = r->node;
    switch (r->kind) {
        case Kind::Get:
            on_get_reply(token, *r, reply, connection.closed_by_us());
            return;
        case Kind::Set:
            on_set_reply(token, *r, reply, connection.closed_by_us());
            return;
        case Kind::Auth:
            requests_.remove(token);
            if (reply != nullptr && reply->type == REDIS_REPLY_ERROR) {
                const std::string_view why = text_of(*reply);
                log_warning_limited("shared-cache: Redis %s refused AUTH: %.*s",
                                    nodes_[static_cast<size_t>(node)]->health->name.c_str(),
                                    static_cast<int>(why.size()), why.data());
            }
            return;
        case Kind::Asking:
            requests_.remove(token);
            return;
        case Kind::Ping: {
            requests_.remove(token);
            Node& n = *nodes_[static_cast<size_t>(node)];
            n.probing = false;
            if (reply != nullptr && reply->type == REDIS_REPLY_STATUS &&
                text_of(*reply) == "PONG") {
                if (n.health->answered()) {
                    log_info("shared-cache: Redis %s answers again", n.health->name.c_str());
                    if (cluster_) refresh_slots();
                }
            } else if (n.connection) {
                n.connection->close();
            }
            return;
        }
        case Kind::Slots:
            requests_.remove(token);
            slots_pending_ = false;
            if (reply != nullptr) apply_slots(*reply);
            return;
    }
}

void SharedTier::connection_lost(const Request& r, bool closed_by_us) {
    // One stall is one failure: counted for each request our close failed as well, one late
    // reply with two lookups behind it made three in a row and took the node down.
    if (closed_by_us) {
        bump(counters_.shared_abandoned);
        return;
    }
    bump(counters_.shared_errors);
    node_failed(r.node, r.epoch);
}

void SharedTier::on_get_reply(RequestId id, Request& r, const redisReply* reply,
                              bool closed_by_us) {
    const int node = r.node;
    const uint64_t epoch = r.epoch;
    if (reply == nullptr) {  // the connection went down with the request on it
        connection_lost(r, closed_by_us);
        finish_get(id, nullptr);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        switch (follow_redirect(id, r, *reply)) {
            case Redirected::Followed:
                return;
            case Redirected::Unfollowable:  // not the node's fault
                bump(counters_.shared_errors);
                finish_get(id, nullptr);
                return;
            case Redirected::No:
                break;
        }
    }

    counters_.shared_latency.record(monotonic_us() - r.sent_us);

    if (reply->type == REDIS_REPLY_ERROR) {
        if (text_of(*reply).starts_with("WRONGTYPE")) {
            node_ok(node, epoch);
            bump(counters_.shared_invalid);  // something else lives at our key
        } else {  // NOAUTH, LOADING, CLUSTERDOWN...: the node cannot serve us
            bump(counters_.shared_errors);
            node_failed(node, epoch);
        }
        finish_get(id, nullptr);
        return;
    }
    node_ok(node, epoch);
    if (reply->type != REDIS_REPLY_STRING || reply->len == 0) {
        // An empty string is GETRANGE's answer for a missing key.
        bump(reply->type == REDIS_REPLY_STRING || reply->type == REDIS_REPLY_NIL
                 ? counters_.shared_misses
                 : counters_.shared_invalid);
        finish_get(id, nullptr);
        return;
    }
    const cache::CacheKey key{r.name.view(), r.qtype, r.qclass, r.flags};
    DecodedValue decoded = decode_value(
        std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(reply->str), reply->len), key,
        ttl_, wall_ms(), r.refresh);
    switch (decoded.verdict) {
        case ValueVerdict::Answer:
            bump(counters_.shared_hits);
            finish_get(id,
                       std::make_shared<const cache::PreparedAnswer>(std::move(*decoded.answer)));
            return;
        case ValueVerdict::Expired:
            bump(counters_.shared_misses);
            break;
        case ValueVerdict::Malformed:
        case ValueVerdict::Oversized:
        case ValueVerdict::Mismatch:
            bump(counters_.shared_invalid);
            log_warning_limited("shared-cache: dropped a %s value at %s",
                                decoded.verdict == ValueVerdict::Oversized  ? "oversized"
                                : decoded.verdict == ValueVerdict::Mismatch ? "mismatched"
                                                                            : "malformed",
                                r.key.c_str());
            break;
    }
    finish_get(id, nullptr);
}

void SharedTier::on_set_reply(RequestId id, Request& r, const redisReply* reply,
                              bool closed_by_us) {
    const int node = r.node;
    const uint64_t epoch = r.epoch;
    if (reply == nullptr) {
        connection_lost(r, closed_by_us);
        requests_.remove(id);
        return;
    }
    if (reply->type == REDIS_REPLY_ERROR) {
        if (follow_redirect(id, r, *reply) == Redirected::Followed) return;
        // OOM (a full Redis with noeviction), READONLY (a replica): writes fail, reads may
        // still work, so the node is not marked down for it.
        requests_.remove(id);
        bump(counters_.shared_errors);
        return;
    }
    requests_.remove(id);
    node_ok(node, epoch);
}

SharedTier::Redirected SharedTier::follow_redirect(RequestId id, Request& r,
                                                   const redisReply& reply) {
    if (!cluster_) return Redirected::No;
    auto redirect = parse_redirect(text_of(reply));
    if (!redirect) return Redirected::No;
    bump(counters_.shared_redirects);
    const int node = node_index(RedisEndpoint{redirect->node, {}});
    if (node < 0) return Redirected::Unfollowable;
    if (!redirect->ask) {
        slots_[redirect->slot] = static_cast<int16_t>(node);
        if (loop_.now_ms() >= slots_refreshed_ms_ + kSlotsRefreshIntervalMs) refresh_slots();
    }
    if (r.redirects >= kMaxRedirects || nodes_[static_cast<size_t>(node)]->down()) {
        return Redirected::Unfollowable;
    }
    ++r.redirects;
    return send(id, r, node, redirect->ask) ? Redirected::Followed : Redirected::Unfollowable;
}

void SharedTier::finish_get(RequestId id, std::shared_ptr<const cache::PreparedAnswer> answer) {
    Request* r = requests_.find(id);
    if (r == nullptr) return;
    const uint64_t token = r->token;
    requests_.remove(id);
    sink_.shared_lookup_done(token, std::move(answer));
}

void SharedTier::node_ok(int node, uint64_t epoch) {
    if (node >= 0) nodes_[static_cast<size_t>(node)]->health->succeeded(epoch);
}

void SharedTier::node_failed(int index, uint64_t epoch) {
    if (index < 0) return;
    Node& node = *nodes_[static_cast<size_t>(index)];
    if (node.health->failed(epoch, loop_.now_ms())) {
        log_warning(
            "shared-cache: Redis %s marked down after %u failures in a row; misses go "
            "upstream directly, and it is probed every second",
            node.health->name.c_str(), NodeHealth::kFailuresBeforeDown);
        if (cluster_) refresh_slots();  // a replica may have taken its slots over
    }
    // Requests still waiting on a down node fail now rather than each at its timeout.
    if (node.down() && node.connection) node.connection->close();
}

void SharedTier::probe_down_nodes() {
    const uint64_t now = loop_.now_ms();
    bool any_down = false;
    for (size_t i = 0; i < nodes_.size(); ++i) {
        Node& node = *nodes_[i];
        if (!node.down()) continue;
        any_down = true;
        if (node.probing || !node.health->claim_probe(now)) continue;
        if (!ready(static_cast<int>(i))) continue;
        RequestId id;
        Request* ping = requests_.add(id);
        ping->kind = Kind::Ping;
        ping->node = static_cast<int>(i);
        if (!node.connection->command({"PING"}, id, RedisConnection::kStatusReply)) {
            requests_.remove(id);
            continue;
        }
        node.probing = true;
        watch(id);
    }
    if (cluster_ && (slots_refreshed_ms_ == 0 || any_down)) refresh_slots();
    probe_timer_ = loop_.add_timer(now + NodeHealth::kProbeIntervalMs, [this] {
        probe_timer_ = EventLoop::kNoTimer;
        probe_down_nodes();
    });
}

void SharedTier::refresh_slots() {
    if (!cluster_ || slots_pending_) return;
    slots_refreshed_ms_ = loop_.now_ms();
    for (size_t i = 0; i < nodes_.size(); ++i) {
        if (nodes_[i]->down() || !ready(static_cast<int>(i))) continue;
        RequestId id;
        Request* r = requests_.add(id);
        r->kind = Kind::Slots;
        r->node = static_cast<int>(i);
        if (!nodes_[i]->connection->command({"CLUSTER", "SLOTS"}, id,
                                            RedisConnection::kArrayReply)) {
            requests_.remove(id);
            continue;
        }
        slots_pending_ = true;
        watch(id);
        return;
    }
}

void SharedTier::apply_slots(const redisReply& reply) {
    auto ranges = parse_cluster_slots(reply);
    if (!ranges) return;
    std::vector<int16_t> slots(kClusterSlots, -1);
    for (const SlotRange& range : *ranges) {
        const int node = node_index(RedisEndpoint{range.master, {}});
        if (node < 0) continue;
        for (uint32_t s = range.first; s <= range.last; ++s) slots[s] = static_cast<int16_t>(node);
    }
    slots_.swap(slots);
}

}  // namespace nscache::sharedcache
