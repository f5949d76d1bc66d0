// SPDX-License-Identifier: BSD-3-Clause
// A worker's pool of pre-opened UDP sockets for upstream queries (issue 11). Each socket is
// bound to a port the kernel picks at random when it is opened, is registered with the
// worker's event loop once, and carries at most one outstanding query at a time: no two
// queries in flight share a source port, and a query's (port, ID) pair stays unpredictable
// while the miss path pays neither socket() nor close() nor epoll_ctl().
//
// A socket goes back to the pool only after its query got the answer it waited for. It is
// closed, and a fresh one (a new random port) takes its place, when its query was given up
// (a late answer must never meet the next query on that port), when a mismatched datagram
// arrived on it (someone may be guessing IDs on that port), after `max_uses` queries, or
// `max_age_ms` after it was opened. Idle sockets are drawn at random, and at least
// `idle_sockets` are kept open per address family, so consecutive queries leave from varying
// ports even under a light load.
//
// Owned by one worker's Resolver and used only from that worker's thread: no locks.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"

namespace nscache::upstream {

struct UdpPoolOptions {
    uint32_t idle_sockets = 64;  // kept open per address family once it is used
    uint32_t max_uses = 64;      // queries per socket before it is replaced
    uint64_t max_age_ms = 60'000;
};

class UdpSocketPool {
  public:
    // Who holds a socket gets its datagrams.
    class Receiver {
      public:
        virtual void on_readable() = 0;

      protected:
        ~Receiver() = default;
    };

    class Socket final : public EventHandler {
      public:
        int fd() const { return fd_; }
        void on_event(uint32_t) override;

      private:
        friend class UdpSocketPool;
        UdpSocketPool* pool_ = nullptr;
        Receiver* receiver_ = nullptr;  // null while idle
        int fd_ = -1;
        int family_ = 0;
        EventLoop::Registration registration_ = EventLoop::kNoRegistration;
        uint32_t uses_ = 0;
        uint64_t opened_ms_ = 0;
        bool tainted_ = false;
        size_t slot_ = 0;  // index in sockets_
    };

    UdpSocketPool(EventLoop& loop, WorkerCounters& counters, UdpPoolOptions options = {});
    ~UdpSocketPool();
    UdpSocketPool(const UdpSocketPool&) = delete;
    UdpSocketPool& operator=(const UdpSocketPool&) = delete;

    // An idle socket of `family` drawn at random (opening sockets as needed), now held by
    // `receiver` for one query; nullptr when no socket could be opened (errno set).
    Socket* acquire(int family, Receiver* receiver);
    // The query on `socket` is over: `answered` when it got its answer (the socket may then
    // serve another query), false when it was given up (the socket is closed).
    void release(Socket* socket, bool answered);
    // A datagram that was not the answer arrived on `socket`: it is closed when released.
    void taint(Socket* socket);

    size_t idle(int family) const;
    size_t open_sockets() const { return sockets_.size(); }

  private:
    std::vector<Socket*>& idle_of(int family);
    Socket* open_socket(int family);
    void close_socket(Socket* socket);
    // A datagram on an idle socket: a duplicate or late answer, or a forgery.
    void on_idle_readable(Socket& socket);
    bool due(const Socket& socket) const;

    EventLoop& loop_;
    WorkerCounters& counters_;
    const UdpPoolOptions options_;
    std::vector<std::unique_ptr<Socket>> sockets_;  // every open socket
    std::vector<Socket*> idle_v4_;
    std::vector<Socket*> idle_v6_;
};

}  // namespace nscache::upstream
