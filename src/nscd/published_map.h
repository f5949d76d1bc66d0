// SPDX-License-Identifier: BSD-3-Clause
// One of the nscd front's shared maps (hosts, passwd, group, services) with what keeps it honest
// over time: its own running guard (running_guard.h: each map's flag needs its own), the timer
// that retires records when their TTL runs out, the settle step after a rotation and the
// once-a-second heartbeat, all on the host front's thread, which alone calls it.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>

#include "common/counters.h"
#include "common/event_loop.h"
#include "nscd/map_writer.h"

namespace nscache::nscd {

class PublishedMap {
  public:
    // `guard`: this map's index in RunningGuard::instance (0 hosts, 1..3); `name`: the GETFD*
    // key.
    PublishedMap(EventLoop& loop, WorkerCounters& counters, MapOptions options, size_t guard,
                 std::string name);
    PublishedMap(const PublishedMap&) = delete;
    PublishedMap& operator=(const PublishedMap&) = delete;

    const std::string& name() const { return name_; }
    std::optional<std::string> open(uint64_t now_s);
    bool opened() const { return writer_.current() != nullptr; }
    // The reply to GETFD* for this map: its name, the map's size, and its descriptor (or an
    // empty reply and -1 when there is no map: the client then uses the socket).
    std::vector<uint8_t> fd_reply(int& fd) const;

    // At the loop's time of this turn.
    bool publish(RequestType type, std::span<const uint8_t> key, std::span<const uint8_t> reply,
                 uint32_t ttl_s);
    uint64_t expiry_of(RequestType type, std::span<const uint8_t> key) const {
        return writer_.expiry_of(type, key);
    }
    // Called after the expiry timer retired records (the caller's levels).
    void set_expired_listener(std::function<void()> listener) { expired_ = std::move(listener); }
    // The writer itself: its drop listener, the netlink stamp (hosts).
    MapWriter& writer() { return writer_; }
    void flush();
    void heartbeat(uint64_t now_s);
    void shutdown();
    size_t entries() const { return writer_.entries(); }
    size_t negatives() const { return writer_.negatives(); }
    uint64_t rotations() const { return writer_.rotations(); }
    // Bumped by every flush: an answer looked up before one must not be published after it.
    uint64_t generation() const { return generation_; }

  private:
    void schedule_expiry(uint64_t due_ms);
    void count_rotations();
    void settle(uint64_t retry_ms);

    EventLoop& loop_;
    WorkerCounters& counters_;
    std::string name_;
    MapWriter writer_;
    uint64_t generation_ = 0;
    uint64_t rotations_seen_ = 0;
    uint64_t deferred_seen_ = 0;
    EventLoop::TimerHandle expiry_timer_ = EventLoop::kNoTimer;
    uint64_t expiry_due_ms_ = 0;
    EventLoop::TimerHandle settle_timer_ = EventLoop::kNoTimer;
    std::function<void()> expired_;
};

}  // namespace nscache::nscd
