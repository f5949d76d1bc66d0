// SPDX-License-Identifier: BSD-3-Clause
// The daemon's side of the NSS module: its socket's protocol (one request, one response per
// connection), served on the host front's thread (front/host_front.h), answering through
// hostdb (/etc/hosts, then the shared cache and the front's Resolver; the module runs the
// search list itself), and publishing every answer in the shared map so that the next lookup
// of that name in any process needs no system call. open() on the daemon's thread at start-up;
// invalidate_map() and post_settings() from any thread; the rest on the front's thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/request_connection.h"
#include "common/result.h"
#include "common/slot_table.h"
#include "front/host_front.h"
#include "front/request_socket.h"
#include "nssd/hosts_map.h"
#include "nssd/nss_answer.h"

namespace nscache::nssd {

struct NssOptions {
    std::string socket_path;
    // Connections one user may hold open at once (max-connections-per-user; root: no limit
    // but kMaxConnections).
    size_t max_connections_per_user = 256;
    int inherited_fd = -1;  // a listening socket given to this process (RequestSocketOptions)
};

class NssServer final : public front::Protocol {
  public:
    // Clients connected at once; past it a new one is closed (the module falls back to the
    // next NSS source). The daemon's descriptor budget reserves this many (resource_limits).
    static constexpr size_t kMaxConnections = 1024;

    // Served on `front`'s thread; add()s itself to it.
    NssServer(front::HostFront& front, NssOptions options);
    ~NssServer();

    // Binds and listens on the socket and creates the map (a sealed memfd handed out over the
    // socket). Call at startup, before any thread runs: it sets the umask.
    Result<void> open();
    // The socket, for a takeover: its descriptor to hand over, its path to leave.
    front::RequestSocket& request_socket() { return socket_; }
    // Any thread: after a cache flush, nothing published before it may be served.
    void invalidate_map() { map_.invalidate_all(); }
    // Any thread: the front's thread switches to `settings` (its routing) at its next wake-up.
    void post_settings(upstream::ForwardingSettingsPtr settings) {
        front_.post_settings(std::move(settings));
    }
    // The map's generation (tests: a hosts file edit or a flush bumps it once).
    uint32_t map_generation() const { return map_.generation(); }

    // front::Protocol
    void host_done(uint64_t id, const hostdb::HostAnswer& answer) override;
    void hosts_changed() override { map_.invalidate_all(); }
    void start() override { socket_.start(); }
    // Clients and socket closed (RequestSocket::close): the module falls back at once.
    void on_stopped() override { socket_.close(); }

    // RequestHandler: the NSS socket's requests (nss/protocol.h).
    size_t request_size(std::span<const uint8_t> in) const override;
    void on_request(RequestConnection& connection, std::span<const uint8_t> request) override;

  private:
    // One question being answered; its SlotTable id is the lookup's id.
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

    front::HostFront& front_;
    WorkerCounters& counters_;
    EventLoop& loop_;
    NssOptions options_;
    HostsMap map_;
    SlotTable<Request> requests_;
    front::RequestSocket socket_;
};

}  // namespace nscache::nssd
