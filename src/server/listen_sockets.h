// SPDX-License-Identifier: BSD-3-Clause
// Opening the listening sockets before privileges are dropped: for every listen address one
// UDP and one TCP socket per worker, bound with SO_REUSEPORT so the kernel spreads clients
// over the workers without a shared accept or receive queue. Or, when the process was given
// its DNS sockets (socket activation, takeover: InheritedSockets "dns-udp"/"dns-tcp"), those
// instead of `listen`: every worker polls every given socket (a descriptor of its own, dup'ed,
// registered with EPOLLEXCLUSIVE so one worker wakes per datagram or connection), and what
// is queued in them stays queued for the next process when this one stops reading.
#pragma once

#include <string>
#include <vector>

#include "common/inherited_sockets.h"
#include "common/result.h"
#include "config/address.h"
#include "config/config.h"

namespace nscache::server {

struct ListenSockets {
    // What is served, as bound or given: port 0 replaced by the real port.
    std::vector<SocketAddress> udp_addresses;
    std::vector<SocketAddress> tcp_addresses;
    std::vector<std::vector<int>> udp;  // [worker][address]
    std::vector<std::vector<int>> tcp;  // [worker][address]
    // DNS over TLS and DNS over HTTPS (listen-tls, listen-https): always bound here, one
    // socket per worker and address.
    std::vector<SocketAddress> tls_addresses;
    std::vector<SocketAddress> https_addresses;
    std::vector<std::vector<int>> tls;    // [worker][address]
    std::vector<std::vector<int>> https;  // [worker][address]
    // The sockets were given (inherited): the workers share them (EPOLLEXCLUSIVE).
    bool shared = false;
    // The descriptors this process bound itself (every worker's), not given: no other process
    // holds them unless a takeover offer duplicated them (Worker::set_private_listeners).
    std::vector<int> bound_here;

    void close_all();
};

// Fails (the caller exits 1) when an address cannot be bound, saying which and why. A default
// address the machine lacks (no IPv6 loopback) is skipped with a warning. With DNS sockets in
// `inherited` (socket activation, or a takeover's handed sockets) it takes them, then binds
// each address and protocol of an explicit `listen` that none of them serves (a default
// `listen` adds nothing to given sockets), and logs which were given and which bound.
Result<void> open_listen_sockets(const Config& config, unsigned workers, ListenSockets& out,
                                 InheritedSockets* inherited = nullptr);

}  // namespace nscache::server
