// SPDX-License-Identifier: BSD-3-Clause
// A single-threaded epoll loop with millisecond timers: each worker thread runs one.
// Everything but wake() and request_stop() must be called from the loop's own thread.
//
// Registrations are SlotTable ids, which carry a generation: an event fetched in the same
// epoll_wait batch as the removal of its handler is recognised as stale and skipped instead of
// reaching freed memory, and a registration removed twice (or never made) touches nothing.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/slot_table.h"

namespace nscache {

class EventHandler {
  public:
    virtual void on_event(uint32_t events) = 0;

  protected:
    ~EventHandler() = default;
};

class EventLoop {
  public:
    using Registration = uint64_t;
    // What a registration holds before add() succeeded: modify/remove/forget ignore it.
    static constexpr Registration kNoRegistration = ~uint64_t{0} - 1;
    using TimerHandle = std::pair<uint64_t, uint64_t>;  // (deadline, sequence)
    static constexpr TimerHandle kNoTimer{0, 0};

    // `clock`: where the loop reads the time (outlives the loop; a fake one in tests).
    explicit EventLoop(const Clock& clock = system_clock());
    ~EventLoop();
    EventLoop(const EventLoop&) = delete;
    EventLoop& operator=(const EventLoop&) = delete;

    // Returns false (errno set, `out` untouched) if epoll refused the descriptor.
    bool add(int fd, uint32_t events, EventHandler* handler, Registration& out);
    void modify(Registration reg, uint32_t events);
    // Unregisters and sets `reg` to kNoRegistration; the caller still owns and closes the
    // descriptor. A stale or empty registration is ignored.
    void remove(Registration& reg);
    // For a descriptor about to be closed (never dup'ed): closing it leaves the epoll set by
    // itself, so this only frees the registration, saving an epoll_ctl call.
    void forget(Registration& reg);
    size_t registrations() const { return handlers_.size(); }

    TimerHandle add_timer(uint64_t deadline_ms, std::function<void()> fn);
    // Safe to call with kNoTimer or a timer that already fired.
    void cancel_timer(TimerHandle& handle);

    // Runs until request_stop(); `on_wake` runs on this thread after every wake().
    void run(const std::function<void()>& on_wake);
    // One turn: waits up to `max_wait_ms` (less if a timer is due sooner) for events, handles
    // them, then runs the timers that are due. For tests that drive a loop step by step.
    void run_once(int max_wait_ms, const std::function<void()>& on_wake = nullptr);
    // Runs at the end of every turn, after the events and the timers: for work a turn
    // gathers and finishes in one go (the worker's batched replies).
    void set_turn_end(std::function<void()> fn) { turn_end_ = std::move(fn); }

    void wake();          // any thread
    void request_stop();  // any thread

    // The time the loop last woke up: one clock read per batch of events.
    uint64_t now_ms() const { return now_ms_; }
    // The same reading in microseconds, for latencies (worked out when asked: the turn itself
    // does no more than before).
    uint64_t now_us() const { return microseconds(now_); }
    void refresh_now();
    const Clock& clock() const { return clock_; }

  private:
    struct Handler {
        EventHandler* handler = nullptr;
        int fd = -1;
    };

    void run_due_timers();
    int wait_timeout(int max_wait_ms) const;  // until the next timer, for epoll_wait

    const Clock& clock_;
    const bool system_clock_;  // clock_ is system_clock(): read CLOCK_MONOTONIC directly
    int epoll_fd_ = -1;
    int wake_fd_ = -1;
    SlotTable<Handler> handlers_;
    std::map<TimerHandle, std::function<void()>> timers_;
    uint64_t next_timer_sequence_ = 1;
    uint64_t now_ms_ = 0;
    timespec now_{};
    std::function<void()> turn_end_;
    std::atomic<bool> stop_{false};
};

}  // namespace nscache
