// SPDX-License-Identifier: BSD-3-Clause
// Mailbox<T>: how another thread hands work to an event loop's thread. Any thread posts; the
// first post of a batch wakes the loop once (not once per item); the loop's thread drains the
// batch in the order posted, between two events. Used for new Settings, reload requests,
// completions of upstream queries and live control options.
//
// Guarantees:
// - post() and close() are thread-safe; drain() and the callbacks it runs are on the loop's
//   thread only, with no lock held (the batch is swapped out first), so a callback may post
//   again (it lands in the next batch).
// - post() after close() is refused (returns false) and the item is dropped unrun: a thread
//   that is stopping takes no new work.
// - One mutex, held only to move a vector; no allocation under it once the vectors have grown.
#pragma once

#include <utility>
#include <vector>

#include "common/event_loop.h"
#include "common/mutex.h"

namespace nscache {

template <typename T>
class Mailbox {
  public:
    explicit Mailbox(EventLoop& loop) : loop_(loop) {}
    Mailbox(const Mailbox&) = delete;
    Mailbox& operator=(const Mailbox&) = delete;

    // Any thread. False when the mailbox is closed (the item is dropped).
    bool post(T item) {
        bool was_empty;
        {
            MutexLock lock(mu_);
            if (closed_) return false;
            was_empty = items_.empty();
            items_.push_back(std::move(item));
        }
        if (was_empty) loop_.wake();
        return true;
    }

    // Any thread: later posts are refused. What is already posted stays for drain().
    void close() {
        MutexLock lock(mu_);
        closed_ = true;
    }

    // The loop's thread: runs `fn(T&)` on every item posted before the call, in order.
    template <typename Fn>
    void drain(Fn&& fn) {
        {
            MutexLock lock(mu_);
            draining_.swap(items_);
        }
        for (T& item : draining_) fn(item);
        draining_.clear();
    }

    // The loop's thread: only the last item posted matters (a snapshot that replaces the one
    // before it, such as Settings); the earlier ones of the batch are dropped. False if none.
    bool take_latest(T& out) {
        {
            MutexLock lock(mu_);
            draining_.swap(items_);
        }
        const bool any = !draining_.empty();
        if (any) out = std::move(draining_.back());
        draining_.clear();
        return any;
    }

  private:
    EventLoop& loop_;
    Mutex mu_;
    std::vector<T> items_ NSCACHE_GUARDED_BY(mu_);
    bool closed_ NSCACHE_GUARDED_BY(mu_) = false;
    std::vector<T> draining_;  // only the loop's thread touches it
};

}  // namespace nscache
