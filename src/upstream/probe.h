// SPDX-License-Identifier: BSD-3-Clause
// Background health probe for an upstream marked down: every second one query for the root
// NS set, off the client path, over UDP, or over the worker's stream connection to a tls://
// or https:// upstream or to a server of a transport = "tcp" rule. The first matching answer marks
// the upstream up again. Lives on one worker's event loop; internal to upstream/.
#pragma once

#include <cstdint>

#include "common/event_loop.h"
#include "upstream/message_stream.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

class UpstreamProbe final : public EventHandler, public MessageStream::Waiter {
  public:
    // `stream`: the TLS, HTTPS or TCP connection to probe over (null: UDP).
    UpstreamProbe(EventLoop& loop, UpstreamSet& upstreams, size_t index, uint16_t edns_size,
                  MessageStream* stream = nullptr);
    ~UpstreamProbe();

    // Sends a probe unless one is outstanding; an unanswered one is dropped after a second.
    void send();
    // send(), if the upstream is marked down.
    void send_if_down() {
        if (upstreams_.at(index_).down.load(std::memory_order_relaxed)) send();
    }
    void on_event(uint32_t events) override;
    void on_stream_answer(dns::Bytes msg, uint32_t rtt_us) override;
    void on_stream_failed() override { stream_pending_ = false; }
    // HTTP 429 or 5xx: alive, but not answering; it stays down.
    void on_stream_refused() override { stream_pending_ = false; }

  private:
    void close_socket();

    EventLoop& loop_;
    UpstreamSet& upstreams_;
    const size_t index_;
    const uint16_t edns_size_;
    int fd_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    uint16_t id_ = 0;
    uint64_t sent_at_ms_ = 0;
    MessageStream* const stream_;
    bool stream_pending_ = false;
};

}  // namespace nscache::upstream
