// SPDX-License-Identifier: BSD-3-Clause
// Every database but hosts (passwd, group, initgroups, services), answered through the
// daemon's own NSS lookups (getpwnam_r and friends), uncached, on a small pool of threads off
// the event loops, as nsncd does: some systems reach NSS modules only through the nscd socket.
// Netgroups get "not served here" (found -1): the client asks NSS itself.
// The pool is shared fairly, as any local user can flood the socket while a source is slow
// (an LDAP server away): each user (the client's uid) has a queue of its own, at most
// kMaxQueuedPerUser long, the users with work are served in turn, and one user holds at most
// half the threads. A lookup whose client has gone (hung up, or past the deadline glibc
// gives up at) is dropped unrun.
// submit(), cancel(), drain() and stop() run on the host front's thread (the nscd socket's), or
// on the daemon's thread once that one has stopped; the pool threads only run lookups.
// A pool thread may be stuck in an NSS module for as long as the module likes (an LDAP server
// away: its own timeout, a minute or more): stop() waits for none of them past a short bound
// and leaves them behind, so everything a pool thread touches lives in a Shared block the
// threads own with this object, and a lookup that ends after stop() has its answer dropped.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/event_loop.h"
#include "common/mutex.h"
#include "nscd/protocol.h"

#include "nscd/user_records.h"

namespace nscache::nscd {

// The reply to one request of another database: the bytes to send (header and payload in
// one write), or empty to close without a reply (a failure the client must not take for "no
// such entry": it then asks NSS itself).
std::vector<uint8_t> other_database_reply(RequestType type, const std::vector<uint8_t>& key);

class OtherDatabases {
  public:
    // What a pool thread runs for one request (other_database_reply; a test's own).
    using Lookup = std::function<std::vector<uint8_t>(RequestType, const std::vector<uint8_t>&)>;

    OtherDatabases(EventLoop& loop, unsigned threads, Lookup lookup = other_database_reply,
                   std::function<uint64_t()> now_ms = monotonic_ms);
    ~OtherDatabases();

    // How long stop() waits for the pool's threads to end (threads stuck in an NSS module
    // are left behind, detached).
    static constexpr uint64_t kStopWaitMs = 1000;

    void start();
    // Nothing queued runs, nothing finished is handed to drain() (no Finish runs after it),
    // and the threads that end within `wait_ms` are joined; returns how many were left
    // running (stuck in a lookup: their answers are dropped when they end).
    size_t stop(uint64_t wait_ms = kStopWaitMs);
    // Pool threads this process has left behind in an NSS module, of every pool (any thread):
    // while one runs, the process must end with _exit, not exit(), whose atexit handlers and
    // library destructors would tear down what that module is still using.
    static size_t threads_left_behind();
    // Queues a lookup for the client `connection` of `user`, worth running until
    // `deadline_ms` (now_ms's clock: the client gives up then); false when it cannot queue.
    bool submit(uint64_t connection, uid_t user, RequestType type, std::vector<uint8_t> key,
                uint64_t deadline_ms);
    // A job of the cache (user_database.h): `work` runs on a pool thread (it may block on an
    // NSS module), and what it returns runs on the loop's thread in drain(). `id` is what
    // cancel() names it by (unique among the jobs queued).
    using Finish = std::function<void()>;
    using Work = std::function<Finish()>;
    bool submit_work(uint64_t id, uid_t user, Work work, uint64_t deadline_ms);
    // The client `connection` of `user` has gone: its lookup, if still queued, never runs.
    void cancel(uint64_t connection, uid_t user);
    // The finished lookups, handed to `done`, and the finished jobs' Finish (on the loop's
    // thread).
    void drain(const std::function<void(uint64_t, std::vector<uint8_t>)>& done);

  private:
    struct Job {
        uint64_t connection = 0;
        uid_t user = 0;
        uint64_t deadline_ms = 0;
        RequestType type = GETPWBYNAME;
        std::vector<uint8_t> key;
        Work work;  // set: a job, not a lookup
    };
    struct Done {
        uint64_t connection = 0;
        std::vector<uint8_t> reply;
        Finish finish;
    };
    struct UserQueue {
        std::deque<Job> jobs;
        unsigned running = 0;  // lookups of this user on pool threads now
        bool in_turn = false;  // in turns_
    };
    // What the pool's threads touch, owned by them and by this object together: a thread left
    // in a module at stop() ends, maybe much later, on this block alone.
    struct Shared {
        Shared(EventLoop& loop, Lookup lookup, std::function<uint64_t()> now_ms,
               unsigned max_running_per_user)
            : loop(loop),
              lookup(std::move(lookup)),
              now_ms(std::move(now_ms)),
              max_running_per_user(max_running_per_user) {}
        // Puts `user` in line for a thread if it has work and a thread to spare.
        void take_turn(uid_t user, UserQueue& queue) NSCACHE_REQUIRES(mu);
        // Forgets `user` once it has nothing queued, running or in line.
        void forget_if_idle(uid_t user) NSCACHE_REQUIRES(mu);

        // Used only while !stopping (the loop and the clock may be gone after stop()).
        EventLoop& loop;
        const Lookup lookup;
        const std::function<uint64_t()> now_ms;
        const unsigned max_running_per_user;
        Mutex mu;
        std::condition_variable_any cv;  // work queued, stopping, a thread ended or woke the loop
        std::unordered_map<uid_t, UserQueue> users NSCACHE_GUARDED_BY(mu);
        std::deque<uid_t> turns NSCACHE_GUARDED_BY(mu);  // users waiting for a thread, in turn
        size_t queued NSCACHE_GUARDED_BY(mu) = 0;
        std::vector<Done> done NSCACHE_GUARDED_BY(mu);
        bool stopping NSCACHE_GUARDED_BY(mu) = false;
        // Threads between releasing `mu` and the end of their loop.wake(): stop() waits for
        // them (a wake() never blocks), so that none wakes a loop that is gone.
        unsigned waking NSCACHE_GUARDED_BY(mu) = 0;
        std::vector<bool> ended NSCACHE_GUARDED_BY(mu);  // by thread index
        unsigned ended_count NSCACHE_GUARDED_BY(mu) = 0;
    };
    bool queue(Job job);
    static void run(const std::shared_ptr<Shared>& shared, size_t index);

    const unsigned thread_count_;
    const std::shared_ptr<Shared> shared_;
    std::vector<std::thread> threads_;  // the loop's thread only
};

}  // namespace nscache::nscd
