// SPDX-License-Identifier: BSD-3-Clause
// What an UpstreamQuery (or a probe) sees of one worker's long-lived connection to one upstream:
// DNS over TCP or TLS (StreamConnection: framed messages matched by DNS ID) and DNS over HTTPS
// (DohConnection: one HTTP/2 stream per query, matched by stream). Queries from any of the
// worker's queries share it; each gets a handle that names it on the connection (its DNS ID
// for TCP and TLS, a number of the connection's own for DoH, whose queries all carry ID 0).
//
// Lives on one worker's event loop; every call comes from that loop. Internal to upstream/.
#pragma once

#include <cstddef>
#include <cstdint>

#include "config/address.h"
#include "dns/response.h"

namespace nscache::upstream {

class MessageStream {
  public:
    // Whoever sent a query hears back exactly once: an answer, that the connection failed, or
    // that the server refused the query. None is called from inside send().
    class Waiter {
      public:
        // `msg` passed the ID and question checks; it is valid only during the call.
        // `rtt_us` is 0 when the query waited for the connection to open.
        virtual void on_stream_answer(dns::Bytes msg, uint32_t rtt_us) = 0;
        // The connection dropped (or was replaced) before the answer came: sending again is
        // worth it.
        virtual void on_stream_failed() = 0;
        // The server answered the query with no DNS message (DoH: HTTP 429 or 5xx, RFC 8484
        // §4.2.1): it is alive but will not answer this now; another server should be asked.
        virtual void on_stream_refused() = 0;

      protected:
        ~Waiter() = default;
    };

    // Queues a query for `question` (which must outlive the query) and returns its handle in
    // `id`; false when too many queries on it still wait for their answers.
    virtual bool send(const dns::UpstreamQuestion& question, Waiter* waiter, uint16_t& id) = 0;
    // `waiter` no longer wants the answer to `id`.
    virtual void cancel(uint16_t id, const Waiter* waiter) = 0;
    // Drops the connection (a broken answer came on it); every query on it is told.
    virtual void reset() = 0;
    // A connect or handshake failed lately and the next one waits.
    virtual bool backing_off() const = 0;
    virtual bool open() const = 0;
    // Queries that still wait for an answer.
    virtual size_t outstanding() const = 0;
    virtual const SocketAddress& address() const = 0;

  protected:
    ~MessageStream() = default;
};

}  // namespace nscache::upstream
