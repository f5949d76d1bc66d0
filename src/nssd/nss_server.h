// SPDX-License-Identifier: BSD-3-Clause
// The daemon's side of the NSS module: a thread with its own event loop serving the NSS
// socket (one request, one response per connection), answering through hostdb (/etc/hosts,
// then the shared cache and this thread's own Resolver; the module runs the search list
// itself), and publishing every answer in the shared map so that the next lookup of that
// name in any process needs no system call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/listener.h"
#include "common/mailbox.h"
#include "common/request_connection.h"
#include "common/slot_table.h"
#include "hostdb/host_lookup.h"
#include "nssd/hosts_map.h"
#include "nssd/nss_answer.h"
#include "upstream/completion.h"
#include "upstream/forwarding_settings.h"
#include "upstream/resolver.h"

namespace nscache::nssd {

struct NssOptions {
    std::string socket_path;
    hostdb::HostLookupOptions lookup;
    // Connections one user may hold open at once (max-connections-per-user; root: no limit
    // but kMaxConnections).
    size_t max_connections_per_user = 256;
};

class NssServer final : public hostdb::HostSink, public RequestHandler {
  public:
    // Clients connected at once; past it a new one is closed (the module falls back to the
    // next NSS source). The daemon's descriptor budget reserves this many (resource_limits).
    static constexpr size_t kMaxConnections = 1024;

    // `worker_index` is this thread's index among those the resolver can deliver to.
    NssServer(upstream::ResolverShared& resolver, WorkerCounters& counters, uint32_t worker_index,
              NssOptions options, upstream::ForwardingSettingsPtr settings);
    ~NssServer();

    // Binds the socket and creates the map (a sealed memfd handed out over the socket); an
    // error message on failure. Call at startup, before any thread runs: it sets the umask.
    std::optional<std::string> open();
    upstream::CompletionQueue& completion_queue() { return lookup_.completion_queue(); }
    void start();
    void stop();
    // Any thread: after a cache flush, nothing published before it may be served.
    void invalidate_map() { map_.invalidate_all(); }
    // Any thread: the NSS thread switches to `settings` (its routing) at its next wake-up.
    void post_settings(upstream::ForwardingSettingsPtr settings) {
        mailbox_.post(std::move(settings));
    }

    void host_done(uint64_t cookie, const hostdb::HostAnswer& answer) override;

    // RequestHandler: the NSS socket's requests (nss/protocol.h).
    size_t request_size(std::span<const uint8_t> in) const override;
    void on_request(RequestConnection& connection, std::span<const uint8_t> request) override;

  private:
    void adopt_posted_settings();

    // One question being answered; its SlotTable id is the lookup's cookie.
    struct Request {
        uint64_t connection_id = 0;
        int32_t family = 0;
        std::vector<uint8_t> key;     // map key (nss/protocol.h)
        uint32_t map_generation = 0;  // the map's, read before the first cache lookup
    };
    using RequestId = SlotTable<Request>::Id;

    void finish(RequestId id, const hostdb::HostAnswer& answer);
    // Sends a response naming the map; pass_fd (if not -1) rides along as SCM_RIGHTS.
    void answer(RequestConnection& connection, uint16_t status, int32_t family, uint32_t ttl,
                std::span<const uint8_t> payload, int pass_fd = -1);
    // NSCACHE_NSS_GET_MAP: the map's descriptor and size.
    void send_map(RequestConnection& connection);

    WorkerCounters& counters_;
    NssOptions options_;
    EventLoop loop_;
    upstream::ForwardingSettingsPtr settings_;
    Mailbox<upstream::ForwardingSettingsPtr> mailbox_{loop_};
    hostdb::HostLookup lookup_;
    HostsMap map_;
    int listen_fd_ = -1;
    std::unique_ptr<Listener> listener_;  // from start()
    RequestConnections connections_;
    SlotTable<Request> requests_;
    std::thread thread_;
};

}  // namespace nscache::nssd
