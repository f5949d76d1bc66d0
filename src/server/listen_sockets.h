// SPDX-License-Identifier: BSD-3-Clause
// Opening the listening sockets before privileges are dropped: for every listen address one
// UDP and one TCP socket per worker, bound with SO_REUSEPORT so the kernel spreads clients
// over the workers without a shared accept or receive queue.
#pragma once

#include <string>
#include <vector>

#include "common/result.h"
#include "config/address.h"
#include "config/config.h"

namespace nscache::server {

struct ListenSockets {
    std::vector<SocketAddress> addresses;  // as bound: port 0 replaced by the real port
    std::vector<std::vector<int>> udp;     // [worker][address]
    std::vector<std::vector<int>> tcp;     // [worker][address]

    void close_all();
};

// Fails (the caller exits 1) when an address cannot be bound, saying which and why. A default
// address the machine lacks (no IPv6 loopback) is skipped with a warning.
Result<void> open_listen_sockets(const Config& config, unsigned workers, ListenSockets& out);

// The same, serving first the listening sockets another instance hands over (takeover;
// `udp` and `tcp` are taken: used or closed). A listen address with handed sockets gets all
// of them, spread over the workers (none left unread: what the kernel queued on each is
// answered), plus an SO_REUSEPORT socket of our own for each worker that got none; an address
// without them is bound as open_listen_sockets does; handed sockets for an address no longer
// configured are closed.
Result<void> adopt_listen_sockets(const Config& config, unsigned workers, std::vector<int> udp,
                                  std::vector<int> tcp, ListenSockets& out);

}  // namespace nscache::server
