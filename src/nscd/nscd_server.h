// SPDX-License-Identifier: BSD-3-Clause
// The nscd socket: glibc's built-in nscd client asks here before any NSS module, for every
// program on the machine. The hosts database is answered by this thread through hostdb (as
// `hosts: files dns` would) and published in the shared map (map_writer.h), which the clients
// read with no system call; every other database goes to OtherDatabases (proxied through NSS,
// uncached) or is declined. One thread with its own event loop, Resolver and map; the map is
// written only here.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/listener.h"
#include "common/mailbox.h"
#include "common/request_connection.h"
#include "common/slot_table.h"
#include "hostdb/host_lookup.h"
#include "nscd/map_writer.h"
#include "nscd/netlink_watch.h"
#include "nscd/other_databases.h"
#include "upstream/forwarding_settings.h"
#include "upstream/resolver.h"

namespace nscache::nscd {

struct NscdOptions {
    std::string socket_path;            // /var/run/nscd/socket when installed
    bool proxy_other_databases = true;  // false: "decline", glibc asks NSS itself
    unsigned proxy_threads = 4;
    // Connections one user may hold open at once (max-connections-per-user; root: no limit
    // but kMaxConnections).
    size_t max_connections_per_user = 256;
    bool prefetch = true;
    MapOptions map;
    hostdb::HostLookupOptions lookup;
};

class NscdServer final : public hostdb::HostSink, public RequestHandler {
  public:
    // Clients connected at once; past it a new one is closed (glibc's client then asks NSS
    // itself). The daemon's descriptor budget reserves this many (resource_limits).
    static constexpr size_t kMaxConnections = 1024;

    NscdServer(upstream::ResolverShared& resolver, WorkerCounters& counters, uint32_t worker_index,
               NscdOptions options, upstream::ForwardingSettingsPtr settings);
    ~NscdServer();

    // As root, before the privilege drop: refuses a socket a live nscd (or nsncd, unscd)
    // answers on, binds the socket (not listening yet: the daemon's own initgroups() must
    // not wait on it), creates the map. An error message on failure.
    std::optional<std::string> open();
    upstream::CompletionQueue& completion_queue() { return lookup_.completion_queue(); }
    // Listens and starts the thread.
    void start();
    // Tells clients the map is gone (they use NSS at once) and stops the thread.
    void stop();
    // Any thread: after a cache flush, nothing published before it may be served.
    void invalidate_map();
    // Any thread: the nscd thread switches to `settings` (its routing) at its next wake-up.
    void post_settings(upstream::ForwardingSettingsPtr settings) {
        mailbox_.post(std::move(settings));
    }

    void host_done(uint64_t cookie, const hostdb::HostAnswer& answer) override;

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
    void schedule_expiry(uint64_t due_ms);
    void schedule_refresh(const Request& r, const hostdb::HostAnswer& answer);
    void flush_map();
    void on_wake();
    // Sets a new map's timestamp long past once the guard points at it, retrying after
    // `retry_ms` (doubling) until it does.
    void settle_map(uint64_t retry_ms);
    // Counts the map's rotations (and those it deferred) since the last call.
    void count_rotations();
    // A record left the map: its prefetch timer goes with it.
    void cancel_refresh(const std::string& index_key);
    // The stats' levels of the map and its timers (nscd_map_records, nscd_refresh_timers).
    void set_levels();

    WorkerCounters& counters_;
    NscdOptions options_;
    EventLoop loop_;
    upstream::ForwardingSettingsPtr settings_;
    Mailbox<upstream::ForwardingSettingsPtr> mailbox_{loop_};
    hostdb::HostLookup lookup_;
    MapWriter map_;
    NetlinkWatch netlink_;
    OtherDatabases others_;
    int listen_fd_ = -1;
    std::unique_ptr<Listener> listener_;  // from start()
    RequestConnections connections_;
    SlotTable<Request> requests_;
    // The prefetch timer of each (type, key) published (by MapWriter::index_key): at most one
    // each, and only while its record is in the map (MapWriter's drop listener cancels it).
    std::unordered_map<std::string, EventLoop::TimerHandle> refresh_timers_;
    EventLoop::TimerHandle expiry_timer_ = EventLoop::kNoTimer;
    EventLoop::TimerHandle settle_timer_ = EventLoop::kNoTimer;
    uint64_t expiry_due_ms_ = 0;
    uint64_t flushes_ = 0;
    uint64_t rotations_seen_ = 0;
    uint64_t deferred_seen_ = 0;
    std::atomic<bool> flush_requested_{false};
    std::thread thread_;
};

}  // namespace nscache::nscd
