// SPDX-License-Identifier: BSD-3-Clause
// The new instance's side of `nscache serve --takeover` (the running one's is
// control/takeover_session.h). The new one connects to the running one's control socket, asks
// "takeover" and receives its descriptors by name (takeover_message.h):
//   dns-udp, dns-tcp   each listening DNS socket (several; the address is the socket's own)
//   control, metrics   the control socket and the metrics endpoint
//   nss, nscd          the local request sockets
//   lock:PATH.lock     the runtime lock files (runtime_lock.h: the lock passes with them)
//   cache              a sealed memfd holding a dump of the cache (cache file format)
// The start-up steps take what they serve from here instead of binding, load the cache before
// any query is read, and once the daemon serves, confirm_ready() tells the running instance
// to drain. Whatever is still held at destruction is closed: the running instance, which kept
// its own descriptors, serves on.
// Main thread only (start-up).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/result.h"
#include "control/takeover_message.h"

namespace nscache::daemon {

class Handover {
  public:
    // How long the running instance may take to send its offer (it dumps its cache first).
    static constexpr int kOfferTimeoutS = 60;
    static constexpr int kConfirmTimeoutS = 10;

    Handover() = default;
    ~Handover();
    Handover(const Handover&) = delete;
    Handover& operator=(const Handover&) = delete;

    enum class Answer {
        Offer,       // the descriptors are here
        NoInstance,  // none answers on the path (no socket, or a stale one)
        // It answered the connection, then closed it with no offer (it exited or died
        // first), or refused because its drain has begun: it is going away.
        Gone,
    };
    // Asks the instance on `control_path`. Not Offer: the caller starts as without --takeover
    // (after Gone, once the instance's lock is free). The process that listens there must run
    // as one of `trusted_uids` (SO_PEERCRED: its uid when it called listen()), or nothing is
    // asked: another user's socket at that path could hand over anything.
    Result<Answer> request(const std::string& control_path, const std::vector<uid_t>& trusted_uids);

    // The "cache" memfd may be read as it is: sealed against writes and size changes (the
    // sender can change nothing while it is loaded) and at most `max_bytes` long.
    static Result<void> check_cache_memfd(int fd, uint64_t max_bytes);

    // The descriptor named `name` (the first, for names given several times), now the
    // caller's; -1 if none.
    int take(const std::string& name);
    // Every descriptor named `name`, now the caller's.
    std::vector<int> take_all(const std::string& name);
    // The lock files, by lock path, for RuntimeLock::acquire (those it leaves stay ours).
    std::map<std::string, int>& locks() { return locks_; }

    // The daemon serves: tells the running instance to drain; an error when it did not
    // confirm (then both serve until the old one is stopped).
    Result<void> confirm_ready();
    bool active() const { return connection_ >= 0; }

  private:
    int connection_ = -1;
    std::vector<control::NamedFd> fds_;
    std::map<std::string, int> locks_;
};

}  // namespace nscache::daemon
