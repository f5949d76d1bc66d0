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
// submit(), cancel() and drain() run on the host front's thread (the nscd socket's); the pool
// threads only run lookups.
#pragma once

#include <sys/types.h>

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
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

    void start();
    void stop();
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
    bool queue(Job job);
    void run();
    // Puts `user` in line for a thread if it has work and a thread to spare.
    void take_turn(uid_t user, UserQueue& queue) NSCACHE_REQUIRES(mu_);
    // Forgets `user` once it has nothing queued, running or in line.
    void forget_if_idle(uid_t user) NSCACHE_REQUIRES(mu_);

    EventLoop& loop_;
    const unsigned thread_count_;
    const Lookup lookup_;
    const std::function<uint64_t()> now_ms_;
    std::vector<std::thread> threads_;
    Mutex mu_;
    std::condition_variable_any cv_;
    const unsigned max_running_per_user_;
    std::unordered_map<uid_t, UserQueue> users_ NSCACHE_GUARDED_BY(mu_);
    std::deque<uid_t> turns_ NSCACHE_GUARDED_BY(mu_);  // users waiting for a thread, in turn
    size_t queued_ NSCACHE_GUARDED_BY(mu_) = 0;
    std::vector<Done> done_ NSCACHE_GUARDED_BY(mu_);
    bool stopping_ NSCACHE_GUARDED_BY(mu_) = false;
};

}  // namespace nscache::nscd
