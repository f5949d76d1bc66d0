// SPDX-License-Identifier: BSD-3-Clause
// One local request socket (the NSS socket, the nscd socket): a unix stream socket born 0666
// at a path, its Listener and its clients (RequestConnections: one request each, a deadline,
// a per-uid share of the connections). The protocol behind it is its RequestHandler.
// bind() and listen() run at start-up on the starting thread (bind() before any other thread
// exists: it sets the process-wide umask); everything else on the thread that runs `loop`.
//
// Guarantees
// - The socket's mode comes from the umask at bind(), never from chmod() by path (which root
//   would follow through a symlink planted in a folder another user owns).
// - The path is unlinked at destruction only if this object bound it.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "common/event_loop.h"
#include "common/listener.h"
#include "common/request_connection.h"
#include "common/result.h"

namespace nscache::front {

struct RequestSocketOptions {
    std::string path;
    std::string what;  // "NSS socket", "nscd socket": in log lines and errors
    size_t max_connections = 1024;
    uint64_t timeout_ms = 10'000;  // a client unanswered this long is closed
    size_t max_per_user = 0;       // 0: a quarter of max_connections (root: none)
    // A listening socket given to this process (InheritedSockets "nss", "nscd"): bind()
    // adopts it instead of replacing the path, and the path is never unlinked (its owner,
    // systemd or the launcher, keeps it, and the connections queued in it).
    int inherited_fd = -1;
};

class RequestSocket {
  public:
    RequestSocket(EventLoop& loop, RequestHandler& handler, RequestSocketOptions options);
    ~RequestSocket();
    RequestSocket(const RequestSocket&) = delete;
    RequestSocket& operator=(const RequestSocket&) = delete;

    // Replaces whatever is at the path with a 0666 socket, bound but not listening yet (a
    // client that connects now is refused and falls back at once); or adopts the inherited
    // socket, which listens already (nobody accepts before start()).
    Result<void> bind();
    // Connections wait in a backlog of `backlog` from here on, until start().
    Result<void> listen(int backlog);
    // Accepts on the loop (call before the loop's thread runs, or on it).
    void start();

    const std::string& path() const { return options_.path; }
    bool inherited() const { return options_.inherited_fd >= 0; }
    // A duplicate of the socket for a takeover offer, or -1 (any thread).
    int dup_fd() const;
    // Another instance serves this socket now (takeover): destruction leaves the path (any
    // thread, before destruction).
    void release_path() { owns_path_.store(false, std::memory_order_relaxed); }
    // The client `id`, or null when it is gone (answered, closed, timed out).
    RequestConnection* find(uint64_t id) { return connections_.find(id); }
    // Closes every client (before the handler goes).
    void close_clients() { connections_.clear(); }
    // At shutdown, once the loop no longer runs: every client, then the socket (its path
    // unlinked if bound here), so that clients fall back at once instead of waiting in a
    // backlog nobody serves; an inherited socket stays open in its owner, whose backlog the
    // next process serves.
    void close();

  private:
    EventLoop& loop_;
    RequestSocketOptions options_;
    int fd_ = -1;
    std::atomic<bool> owns_path_{false};  // bound here: unlinked at the end
    std::unique_ptr<Listener> listener_;  // from start()
    RequestConnections connections_;
};

}  // namespace nscache::front
