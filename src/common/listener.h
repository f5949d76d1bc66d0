// SPDX-License-Identifier: BSD-3-Clause
// A listening socket on an event loop (control socket, metrics endpoint, NSS socket, nscd
// socket, each worker's DNS-over-TCP sockets). Accepting never spins: when the process is out of
// descriptors (EMFILE, ENFILE), the readable listener would wake a level-triggered loop on every
// turn, so a spare descriptor is given up to accept the waiting connection and close it at once;
// without a spare, the listener rests for a second, as it does when the kernel is out of memory
// (ENOBUFS, ENOMEM). An error of one connection (accept(2)'s network errors, EPERM from a
// firewall rule, an aborted connection) skips that one only. At most one log line a second. The
// caller keeps the listening descriptor (and closes it after the Listener is gone). Only the thread
// that runs `loop` may call it, after construction.
#pragma once

#include <sys/socket.h>

#include <functional>
#include <string>

#include "common/event_loop.h"

namespace nscache {

class Listener final : public EventHandler {
  public:
    // Gets each accepted socket (non-blocking, close-on-exec) and owns it from then on.
    using OnAccept = std::function<void(int fd, const sockaddr_storage& peer, socklen_t length)>;
    // Hears of each connection closed at accept because the process is out of descriptors
    // (the DNS workers count it as refused).
    using OnShed = std::function<void()>;
    // accept4(2)'s signature: tests put an accept that fails as the kernel may in its place.
    using AcceptFunction = int (*)(int fd, sockaddr* peer, socklen_t* length, int flags);

    // `what` names the socket in log lines ("control socket", "metrics", "NSS socket").
    Listener(EventLoop& loop, int fd, std::string what, OnAccept on_accept);
    ~Listener();
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;

    bool start();
    // Stops accepting (connections wait in the backlog); start() again resumes.
    void stop();
    // Before start(): the socket is shared with other threads' loops (an inherited socket),
    // so only one of them wakes per connection (EPOLLEXCLUSIVE).
    void set_exclusive(bool exclusive) { exclusive_ = exclusive; }
    void set_on_shed(OnShed on_shed) { on_shed_ = std::move(on_shed); }
    void set_accept_for_tests(AcceptFunction accept) { accept_ = accept; }
    void on_event(uint32_t events) override;

  private:
    void out_of_descriptors();
    void rest();
    void open_spare();

    EventLoop& loop_;
    const int fd_;
    const std::string what_;
    OnAccept on_accept_;
    OnShed on_shed_;
    AcceptFunction accept_ = &::accept4;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    EventLoop::TimerHandle rest_timer_ = EventLoop::kNoTimer;
    int spare_fd_ = -1;
    bool exclusive_ = false;
};

}  // namespace nscache
