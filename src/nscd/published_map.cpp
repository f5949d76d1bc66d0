// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/published_map.h"

#include <algorithm>
#include <ctime>

#include "nscd/running_guard.h"

namespace nscache::nscd {
namespace {

constexpr uint64_t kHeartbeatMs = 1000;

uint64_t wall_s() {
    return static_cast<uint64_t>(time(nullptr));
}

MapOptions with_guard(MapOptions o, size_t guard) {
    if (o.guard == nullptr && o.certainly_running) o.guard = &RunningGuard::instance(guard);
    return o;
}

}  // namespace

PublishedMap::PublishedMap(EventLoop& loop, WorkerCounters& counters, MapOptions options,
                           size_t guard, std::string name)
    : loop_(loop),
      counters_(counters),
      name_(std::move(name)),
      writer_(with_guard(options, guard)) {}

std::optional<std::string> PublishedMap::open(uint64_t now_s) {
    return writer_.open(now_s);
}

std::vector<uint8_t> PublishedMap::fd_reply(int& fd) const {
    const MapFile* map = writer_.current();
    fd = -1;
    if (map == nullptr || map->reader_fd() < 0) return {};
    std::vector<uint8_t> reply(name_.begin(), name_.end());
    reply.push_back(0);
    const uint64_t size = map->map_size();
    const auto* b = reinterpret_cast<const uint8_t*>(&size);
    reply.insert(reply.end(), b, b + sizeof size);
    fd = map->reader_fd();
    return reply;
}

bool PublishedMap::publish(RequestType type, std::span<const uint8_t> key,
                           std::span<const uint8_t> reply, uint32_t ttl_s) {
    if (!opened()) return false;
    const bool published = writer_.publish(type, key, reply, ttl_s, loop_.now_ms(), wall_s());
    count_rotations();
    if (published) schedule_expiry(writer_.expiry_of(type, key));
    return published;
}

void PublishedMap::flush() {
    ++generation_;
    if (!opened()) return;
    writer_.flush(wall_s());
    count_rotations();
}

void PublishedMap::heartbeat(uint64_t now_s) {
    if (opened()) writer_.heartbeat(now_s);
}

void PublishedMap::shutdown() {
    loop_.cancel_timer(expiry_timer_);
    loop_.cancel_timer(settle_timer_);
    expiry_timer_ = settle_timer_ = EventLoop::kNoTimer;
    if (opened()) writer_.shutdown();
}

void PublishedMap::schedule_expiry(uint64_t due_ms) {
    if (due_ms == 0) return;
    if (expiry_timer_ != EventLoop::kNoTimer && expiry_due_ms_ <= due_ms) return;
    loop_.cancel_timer(expiry_timer_);
    expiry_due_ms_ = due_ms;
    expiry_timer_ = loop_.add_timer(due_ms, [this] {
        expiry_timer_ = EventLoop::kNoTimer;
        loop_.refresh_now();
        const uint64_t next = writer_.expire(loop_.now_ms());
        expiry_due_ms_ = 0;
        schedule_expiry(next);
        if (expired_) expired_();
    });
}

void PublishedMap::count_rotations() {
    if (writer_.rotations() != rotations_seen_) {
        bump(counters_.nscd_map_rotations, writer_.rotations() - rotations_seen_);
        rotations_seen_ = writer_.rotations();
        settle(1);
    }
    if (writer_.deferred_rotations() != deferred_seen_) {
        bump(counters_.nscd_map_deferred, writer_.deferred_rotations() - deferred_seen_);
        deferred_seen_ = writer_.deferred_rotations();
    }
}

// As the hosts map does (nscd_server.cpp): look again soon, backing off, never wait here.
void PublishedMap::settle(uint64_t retry_ms) {
    if (settle_timer_ != EventLoop::kNoTimer || writer_.settle()) return;
    settle_timer_ = loop_.add_timer(loop_.now_ms() + retry_ms, [this, retry_ms] {
        settle_timer_ = EventLoop::kNoTimer;
        loop_.refresh_now();
        settle(std::min<uint64_t>(retry_ms * 2, kHeartbeatMs));
    });
}

}  // namespace nscache::nscd
