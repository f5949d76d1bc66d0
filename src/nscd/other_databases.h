// Every database but hosts (passwd, group, initgroups, services), answered through the
// daemon's own NSS lookups (getpwnam_r and friends), uncached, on a small pool of threads off
// the event loops, as nsncd does: some systems reach NSS modules only through the nscd socket.
// Netgroups get "not served here" (found -1): the client asks NSS itself.
// submit() and drain() run on the nscd thread; the pool threads only run the lookups.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "common/event_loop.h"
#include "common/mutex.h"
#include "nscd/protocol.h"

namespace nscache::nscd {

// The reply to one request of another database: the bytes to send (header and payload in
// one write), or empty to close without a reply (a failure the client must not take for "no
// such entry": it then asks NSS itself).
std::vector<uint8_t> other_database_reply(RequestType type, const std::vector<uint8_t>& key);

// The "not served here" reply for `type` (found -1), or empty for a type that has none.
std::vector<uint8_t> declined_reply(RequestType type);

class OtherDatabases {
  public:
    OtherDatabases(EventLoop& loop, unsigned threads);
    ~OtherDatabases();

    void start();
    void stop();
    // Queues a lookup for the client `connection`; false when the queue is full.
    bool submit(uint64_t connection, RequestType type, std::vector<uint8_t> key);
    // The finished lookups, handed to `done` (on the loop's thread).
    void drain(const std::function<void(uint64_t, std::vector<uint8_t>)>& done);

  private:
    struct Job {
        uint64_t connection = 0;
        RequestType type = GETPWBYNAME;
        std::vector<uint8_t> key;
    };
    void run();

    EventLoop& loop_;
    const unsigned thread_count_;
    std::vector<std::thread> threads_;
    Mutex mu_;
    std::condition_variable_any cv_;
    std::deque<Job> jobs_ NSCACHE_GUARDED_BY(mu_);
    std::vector<std::pair<uint64_t, std::vector<uint8_t>>> done_ NSCACHE_GUARDED_BY(mu_);
    bool stopping_ NSCACHE_GUARDED_BY(mu_) = false;
};

}  // namespace nscache::nscd
