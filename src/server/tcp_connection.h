// DNS over TCP (RFC 7766): length-prefixed messages, several queries pipelined on one
// connection, answers written as they become ready (out of order), an idle timeout, and
// back-pressure: a connection with too many unanswered queries or too much unsent data stops
// being read until it drains. A length prefix outside the allowed range closes it.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "common/event_loop.h"
#include "common/slot_table.h"
#include "server/query_pipeline.h"

namespace nscache::server {

class TcpConnections;

class TcpConnection final : public EventHandler {
  public:
    // Queries longer than this are not queries: the connection is closed.
    static constexpr size_t kMaxQueryLength = 4096;

    TcpConnection(TcpConnections& owner, EventLoop& loop, QueryPipeline& pipeline, int fd,
                  uint64_t id, const sockaddr_storage& peer, socklen_t peer_len,
                  uint32_t idle_timeout_ms);
    ~TcpConnection();

    bool register_with_loop();
    void on_event(uint32_t events) override;
    // An answer that was pending: queue it and write what the socket takes.
    void send_answer(std::span<const uint8_t> answer);

  private:
    void read_queries();
    void process_buffer();
    void queue(std::span<const uint8_t> answer);
    void flush();
    void update_interest();
    void arm_idle_timer(uint64_t at_ms);
    void on_idle_timer();
    void close_connection();

    TcpConnections& owner_;
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    const int fd_;
    const uint64_t id_;
    sockaddr_storage peer_;
    socklen_t peer_len_;
    const uint32_t idle_timeout_ms_;

    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    uint32_t interest_ = 0;
    std::vector<uint8_t> in_;
    size_t in_length_ = 0;
    std::vector<uint8_t> out_;
    size_t out_offset_ = 0;
    uint32_t pending_ = 0;
    bool peer_closed_ = false;
    bool closed_ = false;
    uint64_t last_activity_ms_ = 0;
    EventLoop::TimerHandle idle_timer_ = EventLoop::kNoTimer;
};

// The connections of one worker, addressed by ids that carry a generation (a pending answer
// for a connection that has since closed finds nothing).
class TcpConnections {
  public:
    TcpConnections(EventLoop& loop, QueryPipeline& pipeline, std::atomic<uint32_t>& global_count,
                   uint32_t max_connections, uint32_t idle_timeout_ms);

    // Takes ownership of an accepted socket; false (socket closed) over the limit.
    bool adopt(int fd, const sockaddr_storage& peer, socklen_t peer_len);
    TcpConnection* find(uint64_t id);
    // Called by a connection that closed itself; it is destroyed on the loop's next turn.
    void release(uint64_t id);
    void close_all();

  private:
    EventLoop& loop_;
    QueryPipeline& pipeline_;
    std::atomic<uint32_t>& global_count_;
    const uint32_t max_connections_;
    const uint32_t idle_timeout_ms_;
    SlotTable<std::unique_ptr<TcpConnection>> connections_;
    std::vector<std::unique_ptr<TcpConnection>> graveyard_;
};

}  // namespace nscache::server
