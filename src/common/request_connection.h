// SPDX-License-Identifier: BSD-3-Clause
// The clients of a local request socket (the NSS socket, the nscd socket): each connection
// reads one request, waits for its answer, writes it (a descriptor may ride along as
// SCM_RIGHTS) and closes. A client that has not been answered within the deadline is closed,
// and so is one that sends more than one request or one its handler calls invalid.
// The sockets are 0666 (every local user resolves names): one user (SO_PEERCRED uid) holds at
// most a share of the connections, so that idle clients of one cannot lock out the others.
// Root has no share (it is no hostile local user, and a root service's thread pool may have
// more lookups in flight at once): it is held to the total only. A client over a limit is
// closed at accept, never held, so that it falls back to NSS at once.
// Only the thread that runs `loop` may use them.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "common/event_loop.h"
#include "common/slot_table.h"

namespace nscache {

class RequestConnection;

// What a socket's protocol says about its requests.
class RequestHandler {
  public:
    static constexpr size_t kInvalid = std::numeric_limits<size_t>::max();

    // The length of the request at the front of `in` (header and body): 0 while more bytes are
    // needed to tell, kInvalid to close the connection without a word.
    virtual size_t request_size(std::span<const uint8_t> in) const = 0;
    // The whole request; answer with connection.send(), now or later (find it by its id).
    virtual void on_request(RequestConnection& connection, std::span<const uint8_t> request) = 0;
    // The connection is closing (answered, timed out, or its client hung up): work still
    // queued for it can be dropped.
    virtual void on_close(RequestConnection& /*connection*/) {}

  protected:
    ~RequestHandler() = default;
};

class RequestConnections;

class RequestConnection final : public EventHandler {
  public:
    RequestConnection(RequestConnections& owner, int fd, uint64_t id, pid_t peer_pid,
                      uid_t peer_uid);
    ~RequestConnection();
    RequestConnection(const RequestConnection&) = delete;
    RequestConnection& operator=(const RequestConnection&) = delete;

    uint64_t id() const { return id_; }
    // The client's process and user, from SO_PEERCRED at accept (-1 when unknown).
    pid_t peer_pid() const { return peer_pid_; }
    uid_t peer_uid() const { return peer_uid_; }

    bool start();
    void on_event(uint32_t events) override;

    // Writes `bytes` in one piece as far as the socket takes it (a client may read its header
    // with one read), then closes. Empty: closes at once. `pass_fd` (if not -1) rides on the
    // first byte as SCM_RIGHTS; the caller keeps owning it (the connection sends a copy).
    void send(std::vector<uint8_t> bytes, int pass_fd = -1);

  private:
    void read_in();
    ssize_t send_some();
    void write_out();
    void shut();

    RequestConnections& owner_;
    int fd_;
    const uint64_t id_;
    pid_t peer_pid_ = -1;
    uid_t peer_uid_ = static_cast<uid_t>(-1);
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;
    std::vector<uint8_t> in_;
    std::vector<uint8_t> out_;
    size_t offset_ = 0;
    int pass_fd_ = -1;
    bool writing_ = false;
};

class RequestConnections {
  public:
    // A user's share: a quarter of the total unless `max_per_user` says otherwise (uid 0 has
    // none).
    RequestConnections(EventLoop& loop, RequestHandler& handler, size_t max_connections,
                       uint64_t timeout_ms, size_t max_per_user = 0);
    ~RequestConnections();

    // Takes an accepted socket; closes it at once when max_connections are open, or the
    // share of its user (SO_PEERCRED; not root) is.
    void adopt(int fd);
    // The connection `id`, or null when it is gone (closed, timed out).
    RequestConnection* find(uint64_t id);
    void clear();

  private:
    friend class RequestConnection;
    // A connection that is done: destroyed on the loop's next turn, as it is still running.
    void release(RequestConnection* connection);

    EventLoop& loop_;
    RequestHandler& handler_;
    const uint64_t timeout_ms_;
    const size_t max_per_user_;
    SlotTable<std::unique_ptr<RequestConnection>> open_;
    std::unordered_map<uid_t, size_t> per_user_;  // open connections by peer uid
    std::vector<std::unique_ptr<RequestConnection>> graveyard_;
};

}  // namespace nscache
