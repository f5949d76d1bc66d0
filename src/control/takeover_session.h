// SPDX-License-Identifier: BSD-3-Clause
// The running instance's side of `nscache serve --takeover`, one control connection long:
// 1. the peer must be root, or the daemon's own user if the daemon never switched to it
//    (peer_access.h; control-group members may not: the descriptors include sockets bound
//    as root and the cache's contents);
// 2. it is sent the offer (takeover_message.h: listening sockets, lock files, a memfd with
//    the cache), whose descriptors are duplicates this session closes once sent; just
//    before it goes out, `handing_over` runs: this instance gives up its socket paths,
//    whatever happens next (the new one may serve them as soon as it has the message, so no
//    exit of this one, not even a drain that begins while the message is in flight, may
//    unlink them; if the send fails, the files only outlive this instance, stale);
// 3. it says "ready\n" once it serves on them; only then is `drain` called (the daemon stops
//    as on SIGTERM) and "ok draining\n" answered. A peer that closes, says anything else or
//    is silent past the deadline changes nothing: this instance keeps serving, and closing
//    the duplicates leaves its own descriptors as they were. Never both stop.
// Control thread only (the loop's).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "common/event_loop.h"
#include "common/result.h"
#include "control/peer_access.h"
#include "control/takeover_message.h"

namespace nscache::control {

struct TakeoverHooks {
    // Duplicates of what to hand over (the session closes them), or why not.
    std::function<Result<std::vector<NamedFd>>()> offer;
    // The offer is about to be sent: the new instance may hold the sockets from now on
    // (null: nothing to do).
    std::function<void()> handing_over;
    // The new instance serves: stop reading and exit as on SIGTERM. Null: takeover refused.
    std::function<void()> drain;
};

class TakeoverSession final : public EventHandler {
  public:
    // How long the new instance may take from the offer to "ready" (it loads the cache and
    // starts its threads in between).
    static constexpr uint64_t kReadyTimeoutMs = 60'000;

    // Takes `fd` (a connected, non-blocking control client). `done` runs once the session
    // has closed its socket; the owner destroys the session after that event.
    TakeoverSession(EventLoop& loop, int fd, const ControlAccess& access,
                    const TakeoverHooks& hooks, std::function<void()> done);
    ~TakeoverSession();
    TakeoverSession(const TakeoverSession&) = delete;
    TakeoverSession& operator=(const TakeoverSession&) = delete;

    // Checks the peer and sends the offer (or a refusal), then waits for "ready".
    void start();
    void on_event(uint32_t events) override;
    // True once this session has called `drain`.
    bool drained() const { return drained_; }

  private:
    void refuse(const std::string& why);
    void abandon(const char* why);
    void finish();

    EventLoop& loop_;
    const int fd_;
    ControlAccess access_;
    TakeoverHooks hooks_;
    std::function<void()> done_;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    EventLoop::TimerHandle deadline_ = EventLoop::kNoTimer;
    std::string in_;
    bool closed_ = false;
    bool drained_ = false;
};

}  // namespace nscache::control
