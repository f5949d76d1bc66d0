// SPDX-License-Identifier: BSD-3-Clause
// The worker's stream connections to its upstreams: one TCP, one TLS and one HTTPS (HTTP/2)
// connection per upstream server at most, made on first use. An entry holds its server, so a
// server a reload dropped cannot be freed and its address reused by another server while a
// connection to it is still here.
//
// Lives on one worker's event loop (the Resolver owns it); every call comes from that loop.
// Internal to upstream/.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "upstream/doh_connection.h"
#include "upstream/stream_connection.h"
#include "upstream/tls_client.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

class StreamPool {
  public:
    StreamPool(EventLoop& loop, WorkerCounters& counters, const TlsClient* tls,
               StreamOptions options)
        : loop_(loop), counters_(counters), tls_(tls), options_(options) {}

    // To the server's cleartext address (its TCP fallback).
    StreamConnection& tcp(const std::shared_ptr<UpstreamServer>& server);
    // nullptr when the daemon has no TLS context.
    StreamConnection* tls(const std::shared_ptr<UpstreamServer>& server);
    // DNS over HTTPS to an https:// server; nullptr when the daemon has no TLS context.
    DohConnection* https(const std::shared_ptr<UpstreamServer>& server);
    // The connection an https:// or tls:// server's queries take (nullptr: no TLS context).
    MessageStream* encrypted(const std::shared_ptr<UpstreamServer>& server);

    // After a reload: closes the connections to servers that `keep` does not name and that
    // carry no query (those that do are looked at again on the next call).
    void forget_others(const std::vector<const UpstreamServer*>& keep);

  private:
    template <typename Connection>
    struct Entry {
        std::shared_ptr<UpstreamServer> server;
        std::unique_ptr<Connection> connection;
    };
    template <typename Connection>
    using Map = std::unordered_map<const UpstreamServer*, Entry<Connection>>;
    template <typename Connection>
    static void forget_others(Map<Connection>& map, const std::vector<const UpstreamServer*>& keep);

    EventLoop& loop_;
    WorkerCounters& counters_;
    const TlsClient* const tls_;
    const StreamOptions options_;
    Map<StreamConnection> tcp_;
    Map<StreamConnection> tls_connections_;
    Map<DohConnection> https_connections_;
};

}  // namespace nscache::upstream
