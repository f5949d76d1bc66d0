// SPDX-License-Identifier: BSD-3-Clause
// The nscd socket: glibc's built-in nscd client asks here before any NSS module, for every
// program on the machine. The hosts database is answered by this thread through hostdb (as
// `hosts: files dns` would) and published in the shared map (map_writer.h), which the clients
// read with no system call; every other database goes to OtherDatabases (proxied through NSS,
// uncached) or is declined. Served on the host front's thread (front/host_front.h), which
// alone writes the map; open() on the daemon's thread at start-up, invalidate_map() and
// post_settings() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/request_connection.h"
#include "common/result.h"
#include "common/slot_table.h"
#include "front/host_front.h"
#include "front/request_socket.h"
#include "nscd/map_writer.h"
#include "nscd/netlink_watch.h"
#include "nscd/other_databases.h"
#include "nscd/published_map.h"
#include "nscd/user_database.h"

namespace nscache::nscd {

struct NscdOptions {
    std::string socket_path;            // /var/run/nscd/socket when installed
    bool proxy_other_databases = true;  // false: "decline", glibc asks NSS itself
    // The pool that runs proxied lookups and NSS module jobs. Its threads mostly wait on a
    // slow source (a directory away): sized for blocked calls, not for cores, so that 50
    // lookups stuck on one source still leave threads for other users (one holds at most
    // half, other_databases.h) and the 2.5 s deadline, not the pool, bounds a client's wait.
    unsigned proxy_threads = 16;
    // passwd, group, initgroups, services (user_database.h).
    UserDbOptions users;
    // Connections one user may hold open at once (max-connections-per-user; root: no limit
    // but kMaxConnections).
    size_t max_connections_per_user = 256;
    bool prefetch = true;
    MapOptions map;
    int inherited_fd = -1;  // a listening socket given to this process (RequestSocketOptions)
};

class NscdServer final : public front::Protocol {
  public:
    // Clients connected at once; past it a new one is closed (glibc's client then asks NSS
    // itself). The daemon's descriptor budget reserves this many (resource_limits).
    static constexpr size_t kMaxConnections = 1024;

    // Served on `front`'s thread; add()s itself to it (add this protocol first: at shutdown
    // its clients must be told first that the map is gone).
    NscdServer(front::HostFront& front, NscdOptions options);
    ~NscdServer();

    // As root, before the privilege drop: refuses a socket a live nscd (or nsncd, unscd)
    // answers on, binds the socket (not listening yet: the daemon's own initgroups() must
    // not wait on it), creates the map.
    Result<void> open();
    // The socket, for a takeover: its descriptor to hand over, its path to leave.
    front::RequestSocket& request_socket() { return socket_; }
    // Any thread: after a cache flush, nothing published before it may be served.
    void invalidate_map();
    // Any thread: the front's thread switches to `settings` (its routing) at its next wake-up.
    void post_settings(upstream::ForwardingSettingsPtr settings) {
        front_.post_settings(std::move(settings));
    }
    // The map's records and how often it was flushed or rotated (tests).
    size_t map_entries() const { return map_.entries(); }
    UserDatabases& user_databases() { return users_; }
    uint64_t map_rotations() const { return map_.rotations(); }

    // front::Protocol. start(): listens (the privilege drop is over) and accepts.
    void host_done(uint64_t id, const hostdb::HostAnswer& answer) override;
    void hosts_changed() override { flush_map(); }
    void start() override;
    void on_thread_start() override;
    void on_wake() override;
    // Tells clients the map is gone (they use NSS at once), then closes the socket and its
    // clients (RequestSocket::close).
    void on_stopped() override;

    // RequestHandler: glibc's nscd requests (nscd/protocol.h).
    size_t request_size(std::span<const uint8_t> in) const override;
    void on_request(RequestConnection& connection, std::span<const uint8_t> request) override;
    void on_close(RequestConnection& connection) override;

  private:
    static constexpr uint64_t kNoConnection = ~uint64_t{0};

    struct Request {
        // kNoConnection: a prefetch, nobody waits (0 is a connection's id like any other).
        uint64_t connection_id = kNoConnection;
        RequestType type = GETHOSTBYNAME;
        std::vector<uint8_t> key;
        uint64_t flushes = 0;  // flushes_ when it started: a flush since voids its answer
        uint32_t refreshes_left = 0;
    };
    using RequestId = SlotTable<Request>::Id;

    void start_host_lookup(RequestConnection* connection, RequestType type,
                           std::vector<uint8_t> key, uint32_t refreshes_left, bool refresh,
                           const std::string& refresh_name);
    void answer_host(RequestId id, const hostdb::HostAnswer& answer);
    void send_map(RequestConnection& connection);
    void schedule_refresh(const Request& r, const hostdb::HostAnswer& answer);
    void flush_map();
    // The map's staleness stamp, once a second (MapWriter::heartbeat).
    void heartbeat();
    // A record left the map: its prefetch timer goes with it.
    void cancel_refresh(const std::string& index_key);
    // The stats' levels of the map and its timers (nscd_map_records, nscd_refresh_timers).
    void set_levels();

    front::HostFront& front_;
    WorkerCounters& counters_;
    EventLoop& loop_;
    NscdOptions options_;
    PublishedMap map_;  // hosts
    NetlinkWatch netlink_;
    OtherDatabases others_;
    SlotTable<Request> requests_;
    // The prefetch timer of each (type, key) published (by MapWriter::index_key): at most one
    // each, and only while its record is in the map (MapWriter's drop listener cancels it).
    std::unordered_map<std::string, EventLoop::TimerHandle> refresh_timers_;
    uint64_t flushes_ = 0;
    std::atomic<bool> flush_requested_{false};
    bool serving_ = false;  // start() listened: on_stopped() has a map to shut down
    UserDatabases users_;
    // Last: its clients close before what their requests refer to.
    front::RequestSocket socket_;
};

}  // namespace nscache::nscd
