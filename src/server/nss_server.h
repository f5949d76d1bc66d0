// The daemon's side of the NSS module: a thread with its own event loop serving the NSS
// socket (one request, one response per connection), resolving through the shared cache and
// the upstream machinery like a worker does, and publishing every answer in the shared map
// so that the next lookup of that name in any process needs no system call.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "server/hosts_map.h"
#include "server/nss_answer.h"
#include "server/server_shared.h"
#include "server/settings_mailbox.h"
#include "upstream/completion.h"
#include "upstream/resolver.h"

namespace nscache::server {

struct NssOptions {
    std::string socket_path;
};

class NssConnection;

class NssServer final : public upstream::CompletionSink {
  public:
    // `worker_index` is this thread's index among those the resolver can deliver to.
    NssServer(ServerShared& shared, WorkerCounters& counters, uint32_t worker_index,
              NssOptions options, SettingsPtr settings);
    ~NssServer();

    // Binds the socket and creates the map (a sealed memfd handed out over the socket); an
    // error message on failure. Call at startup, before any thread runs: it sets the umask.
    std::optional<std::string> open();
    upstream::CompletionQueue& completion_queue() { return queue_; }
    void start();
    void stop();
    // Any thread: after a cache flush, nothing published before it may be served.
    void invalidate_map() { map_.invalidate_all(); }
    // Any thread: the NSS thread switches to `settings` (its routing) at its next wake-up.
    void post_settings(SettingsPtr settings) {
        mailbox_.post(std::move(settings));
        loop_.wake();
    }

    void deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) override;

    // Used by connections.
    void on_request(NssConnection& connection, const nscache_nss_request& header,
                    std::span<const uint8_t> data);
    void release(NssConnection* connection);

  private:
    void adopt_posted_settings();

    struct Part {
        uint16_t qtype = 0;
        bool done = false;
        HostsResult result;
    };
    // One question being answered; its SlotTable id (with the part) is the resolver's cookie.
    struct Request {
        uint64_t connection_id = 0;
        uint16_t op = 0;
        int32_t family = 0;
        std::vector<uint8_t> key;     // map key (nss/protocol.h)
        upstream::Question question;  // the name asked in DNS form (qtype set per part)
        std::vector<Part> parts;      // A, AAAA or PTR
        uint32_t map_generation = 0;  // the map's, read before the first cache lookup
    };
    using RequestId = SlotTable<Request>::Id;

    void accept_connections();
    // Out of descriptors: accepts the oldest waiting client into the spare descriptor and
    // closes it; false when there is no spare (then pause_listener()).
    bool shed_connection();
    // Stops watching the listening socket for a short while.
    void pause_listener();
    void lookup_part(RequestId id, size_t part);
    void part_done(RequestId id, size_t part, std::span<const uint8_t> answer);
    void finish(RequestId id);
    // Sends a response naming the map; pass_fd (if not -1) rides along as SCM_RIGHTS.
    void answer(NssConnection& connection, uint16_t status, int32_t family, uint32_t ttl,
                std::span<const uint8_t> payload, int pass_fd = -1);
    // NSCACHE_NSS_GET_MAP: the map's descriptor and size.
    void send_map(NssConnection& connection);

    class Acceptor;

    ServerShared& shared_;
    WorkerCounters& counters_;
    NssOptions options_;
    EventLoop loop_;
    upstream::CompletionQueue queue_;
    SettingsPtr settings_;
    SettingsMailbox mailbox_;
    upstream::Resolver resolver_;
    HostsMap map_;
    int listen_fd_ = -1;
    int spare_fd_ = -1;
    EventLoop::Registration listener_ = EventLoop::kNoRegistration;
    bool listener_paused_ = false;
    std::unique_ptr<Acceptor> acceptor_;
    SlotTable<std::unique_ptr<NssConnection>> connections_;
    std::vector<std::unique_ptr<NssConnection>> graveyard_;
    SlotTable<Request> requests_;
    std::vector<uint8_t> scratch_;
    std::thread thread_;
};

}  // namespace nscache::server
