// One question sent upstream, from first send to final answer: picks an upstream, sends over
// UDP from a fresh socket (so a fresh random source port) with a fresh random ID, accepts only
// an answer from that address and port with that ID and question, retries on the next
// upstream after a timeout, switches to TCP on TC=1, and gives up at the query deadline.
// Lives on one worker's event loop; internal to upstream/.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cache/answer.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "dns/wire.h"
#include "upstream/question.h"

namespace nscache::upstream {

class Resolver;
struct ResolverShared;

class UpstreamQuery final : public EventHandler {
public:
    UpstreamQuery(Resolver& owner, EventLoop& loop, ResolverShared& shared,
                  WorkerCounters& counters, const Question& question, std::string key);
    ~UpstreamQuery();

    void start();
    void on_event(uint32_t events) override;

    const Question& question() const { return question_; }
    const std::string& key() const { return key_; }

private:
    enum class Mode { Udp, TcpConnecting, TcpReading };

    void next_attempt();
    bool send_udp();
    void start_tcp();
    void on_udp_readable();
    void on_tcp_event(uint32_t events);
    void on_attempt_timeout();
    void arm_timer(uint64_t attempt_timeout_ms);
    // A datagram or TCP message that passed the source check.
    void on_answer(dns::Bytes msg, bool over_tcp);
    bool open_socket(int type);
    void close_socket();
    // Ends the query; `this` is destroyed when it returns.
    void finish(std::shared_ptr<const cache::PreparedAnswer> answer);

    Resolver& owner_;
    EventLoop& loop_;
    ResolverShared& shared_;
    WorkerCounters& counters_;
    const Question question_;
    const std::string key_;

    Mode mode_ = Mode::Udp;
    int fd_ = -1;
    EventLoop::Registration registration_ = 0;
    int upstream_ = -1;
    uint64_t tried_ = 0;  // bit i: upstream i tried in this round
    int attempts_ = 0;
    uint16_t id_ = 0;
    uint64_t sent_at_us_ = 0;
    uint64_t deadline_ms_ = 0;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;
    std::vector<uint8_t> tcp_buffer_;
    size_t tcp_have_ = 0;
    // The last error answer (SERVFAIL, REFUSED...), relayed if no upstream does better.
    std::shared_ptr<const cache::PreparedAnswer> fallback_;
};

}  // namespace nscache::upstream
