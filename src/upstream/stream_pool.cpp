// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/stream_pool.h"

#include <algorithm>

namespace nscache::upstream {

StreamConnection& StreamPool::tcp(const std::shared_ptr<UpstreamServer>& server) {
    auto& entry = tcp_[server.get()];
    if (!entry.connection) {
        entry.server = server;
        entry.connection = std::make_unique<StreamConnection>(
            loop_, counters_, server->udp_address(), nullptr, TlsPeer{}, options_);
    }
    return *entry.connection;
}

StreamConnection* StreamPool::tls(const std::shared_ptr<UpstreamServer>& server) {
    if (tls_ == nullptr) return nullptr;
    auto& entry = tls_connections_[server.get()];
    if (!entry.connection) {
        entry.server = server;
        entry.connection = std::make_unique<StreamConnection>(loop_, counters_, server->address,
                                                              tls_, server->tls_peer, options_);
    }
    return entry.connection.get();
}

DohConnection* StreamPool::https(const std::shared_ptr<UpstreamServer>& server) {
    if (tls_ == nullptr) return nullptr;
    auto& entry = https_connections_[server.get()];
    if (!entry.connection) {
        entry.server = server;
        entry.connection =
            std::make_unique<DohConnection>(loop_, counters_, *server, *tls_, options_);
    }
    return entry.connection.get();
}

MessageStream* StreamPool::encrypted(const std::shared_ptr<UpstreamServer>& server) {
    if (server->https) return https(server);
    return tls(server);
}

void StreamPool::forget_others(const std::vector<const UpstreamServer*>& keep) {
    forget_others(tcp_, keep);
    forget_others(tls_connections_, keep);
    forget_others(https_connections_, keep);
}

template <typename Connection>
void StreamPool::forget_others(Map<Connection>& map,
                               const std::vector<const UpstreamServer*>& keep) {
    std::erase_if(map, [&keep](const auto& item) {
        return item.second.connection->outstanding() == 0 &&
               std::find(keep.begin(), keep.end(), item.first) == keep.end();
    });
}

}  // namespace nscache::upstream
