// SPDX-License-Identifier: BSD-3-Clause
// One client of the control socket or an HTTP endpoint (metrics, health), served without blocking
// on the control thread's event loop: the request is read as it comes, the answer written as the
// socket takes it, and a deadline from accept to the answer's last byte closes a client that
// is slow or silent, so one client can never hold the others (or shutdown) up.
// Control thread only.
#pragma once

#include <cstdint>
#include <string>

#include "common/event_loop.h"

namespace nscache::control {

enum class ConnectionKind : uint8_t { Control, Metrics, Health };

// What a connection needs from its server.
class ConnectionOwner {
  public:
    // The answer to a complete request: a control line (without its newline) or an HTTP head.
    virtual std::string answer(ConnectionKind kind, const std::string& request) = 0;
    // The connection has closed its socket; the owner destroys it after this event.
    virtual void closed(uint64_t id) = 0;
    // A request that needs the socket itself (takeover: more than one exchange, descriptors):
    // true makes the connection let go of its socket and hand it to adopt_socket().
    virtual bool wants_socket(ConnectionKind, const std::string&) { return false; }
    virtual void adopt_socket(const std::string&, int fd) { (void)fd; }

  protected:
    ~ConnectionOwner() = default;
};

class ControlConnection final : public EventHandler {
  public:
    // Requests longer than this are refused.
    static constexpr size_t kMaxRequest = 4096;

    ControlConnection(ConnectionOwner& owner, EventLoop& loop, ConnectionKind kind, int fd,
                      uint64_t id);
    ~ControlConnection();
    ControlConnection(const ControlConnection&) = delete;
    ControlConnection& operator=(const ControlConnection&) = delete;

    // Registers with the loop and arms the deadline; false (socket closed) if epoll refused.
    bool start(uint64_t deadline_ms);
    void on_event(uint32_t events) override;
    ConnectionKind kind() const { return kind_; }

  private:
    void read_request();
    // True when `in_` holds a whole request (or the client has said all it will).
    bool request_complete(bool peer_done) const;
    void respond(const std::string& request);
    void write_answer();
    void close_connection();

    ConnectionOwner& owner_;
    EventLoop& loop_;
    const ConnectionKind kind_;
    const int fd_;
    const uint64_t id_;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    EventLoop::TimerHandle deadline_ = EventLoop::kNoTimer;
    std::string in_;
    std::string out_;
    size_t out_offset_ = 0;
    bool answering_ = false;
    bool closed_ = false;
};

}  // namespace nscache::control
