// SPDX-License-Identifier: BSD-3-Clause
// The netlink change counter glibc's __check_pf reads from the nscd map (extra_data[0]):
// while it holds still, getaddrinfo reuses the interface list it dumped before instead of
// dumping it again on every AI_ADDRCONFIG call. Bumped on every address, route, rule or prefix
// change, as nscd does, so a client never keeps interface data older than the last change.
// Belongs to the host front's thread (front/host_front.h), which serves the nscd socket.
#pragma once

#include <cstdint>
#include <functional>

#include "common/event_loop.h"

namespace nscache::nscd {

class NetlinkWatch final : public EventHandler {
  public:
    ~NetlinkWatch();
    // Subscribes on `loop`; `changed(stamp)` runs with every new value (never 0). False (a
    // warning logged) when netlink is unavailable: stamp() then stays put.
    bool open(EventLoop& loop, std::function<void(uint32_t)> changed);
    uint32_t stamp() const { return stamp_; }
    void on_event(uint32_t events) override;

  private:
    void bump();

    EventLoop* loop_ = nullptr;
    int fd_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    uint32_t stamp_ = 0;
    std::function<void(uint32_t)> changed_;
};

}  // namespace nscache::nscd
