#include "upstream/upstream_query.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/clock.h"
#include "common/random.h"
#include "dns/response.h"
#include "upstream/resolver.h"

namespace nscache::upstream {
namespace {

// Attempts per query at most, whatever the upstreams do: a query never spins.
constexpr int kMaxAttempts = 12;
// UDP attempts listened to at once; the oldest is given up when a fifth goes out.
constexpr size_t kMaxOpenAttempts = 4;
// The wait doubles with each retry up to this.
constexpr uint64_t kMaxAttemptWaitMs = 1500;
// Datagrams read per readiness event before returning to the loop.
constexpr int kMaxReadsPerEvent = 16;

bool same_endpoint(const sockaddr_storage& from, socklen_t from_len, const SocketAddress& want) {
    return SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&from), from_len) == want;
}

bool is_final_rcode(uint8_t rcode) {
    return rcode == static_cast<uint8_t>(dns::Rcode::NoError) ||
           rcode == static_cast<uint8_t>(dns::Rcode::NxDomain);
}

// Reused across queries on this thread: answers are parsed one at a time.
thread_local uint8_t tls_datagram[65536];
thread_local dns::ScannedResponse tls_scan;

}  // namespace

UpstreamQuery::UpstreamQuery(Resolver& owner, EventLoop& loop, ResolverShared& shared,
                             UpstreamSet& upstreams, WorkerCounters& counters,
                             const Question& question, std::string key)
    : owner_(owner),
      loop_(loop),
      shared_(shared),
      upstreams_(upstreams),
      counters_(counters),
      question_(question),
      key_(std::move(key)) {}

UpstreamQuery::~UpstreamQuery() {
    loop_.cancel_timer(timer_);
    for (auto& attempt : udp_) close_attempt(*attempt);
    close_tcp();
}

void UpstreamQuery::start() {
    deadline_ms_ = loop_.now_ms() + owner_.options().query_timeout_ms;
    upstreams_.counters().questions.fetch_add(1, std::memory_order_relaxed);
    next_attempt();
}

// One timer per query: the current attempt's wait, or the deadline if that comes first.
void UpstreamQuery::arm_timer(uint64_t wait_ms) {
    loop_.cancel_timer(timer_);
    const uint64_t at = std::min(loop_.now_ms() + wait_ms, deadline_ms_);
    timer_ = loop_.add_timer(at, [this] {
        timer_ = EventLoop::kNoTimer;
        if (loop_.now_ms() >= deadline_ms_) {
            finish(fallback_, fallback_upstream_);
            return;
        }
        next_attempt();  // the earlier attempts stay open
    });
}

void UpstreamQuery::close_attempt(UdpAttempt& attempt) {
    if (attempt.fd < 0) return;
    loop_.forget(attempt.registration);  // the socket is ours alone: close() leaves epoll
    close(attempt.fd);
    attempt.fd = -1;
}

void UpstreamQuery::close_attempts(int answered_by) {
    for (auto& attempt : udp_) {
        if (attempt->fd >= 0 && attempt->upstream != answered_by) {
            bump(counters_.upstream_timeouts);
            upstreams_.record_timeout(static_cast<size_t>(attempt->upstream), loop_.now_ms());
        }
        close_attempt(*attempt);
    }
    udp_.clear();
}

uint64_t UpstreamQuery::unresponsive_mask() const {
    uint64_t mask = 0;
    for (size_t i = 0; i < upstreams_.size() && i < 64; ++i) {
        if (udp_sent_[i] >= kMaxTriesPerServer) mask |= uint64_t{1} << i;
    }
    return mask;
}

void UpstreamQuery::next_attempt() {
    if (++attempts_ > kMaxAttempts) {
        arm_timer(deadline_ms_);  // nothing more to send: wait for late answers or the deadline
        return;
    }
    const uint64_t unresponsive = unresponsive_mask();
    int upstream = upstreams_.choose(tried_ | unresponsive, loop_.now_ms());
    if (upstream < 0) {
        // Every upstream was tried in this round. An error answer is as good as it gets;
        // after timeouts only, another round among those not yet unresponsive.
        if (fallback_) {
            finish(fallback_, fallback_upstream_);
            return;
        }
        tried_ = 0;
        upstream = upstreams_.choose(unresponsive, loop_.now_ms());
        if (upstream < 0) {  // none left to ask: late answers or the deadline end it
            arm_timer(deadline_ms_);
            return;
        }
    }
    tried_ |= uint64_t{1} << upstream;
    ++udp_sent_[upstream];
    auto attempt = send_udp(upstream);
    if (!attempt) {
        bump(counters_.upstream_errors);
        // Try the next one on the loop's next turn rather than recursing here.
        arm_timer(0);
        return;
    }
    if (udp_.size() == kMaxOpenAttempts) {
        UdpAttempt& oldest = *udp_.front();
        if (oldest.fd >= 0) {
            bump(counters_.upstream_timeouts);
            upstreams_.record_timeout(static_cast<size_t>(oldest.upstream), loop_.now_ms());
        }
        close_attempt(oldest);
        udp_.erase(udp_.begin());
    }
    udp_.push_back(std::move(attempt));
    const uint64_t base = upstreams_.attempt_timeout_ms(static_cast<size_t>(upstream));
    arm_timer(std::min(base << std::min(attempts_ - 1, 4), kMaxAttemptWaitMs));
}

std::unique_ptr<UpstreamQuery::UdpAttempt> UpstreamQuery::send_udp(int upstream) {
    UpstreamServer& server = upstreams_.at(static_cast<size_t>(upstream));
    auto attempt = std::make_unique<UdpAttempt>();
    attempt->query = this;
    attempt->upstream = upstream;
    attempt->fd = socket(server.address.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (attempt->fd < 0) return nullptr;
    if (!loop_.add(attempt->fd, EPOLLIN, attempt.get(), attempt->registration)) {
        close(attempt->fd);
        return nullptr;
    }
    attempt->id = secure_random_u16();
    uint8_t wire[dns::kMaxUpstreamQuery];
    const size_t n = dns::write_upstream_query(question_.wire(), attempt->id,
                                               owner_.options().edns_buffer_size, wire);
    // An unconnected socket: the kernel binds it to a random ephemeral port on this first
    // send, and we see (and count) datagrams from any source instead of the kernel hiding them.
    const ssize_t sent =
        sendto(attempt->fd, wire, n, 0, server.address.sa(), server.address.length);
    if (sent != static_cast<ssize_t>(n)) {
        close_attempt(*attempt);
        return nullptr;
    }
    attempt->sent_at_us = monotonic_us();
    sent_any_ = true;
    bump(counters_.upstream_queries);
    server.queries.fetch_add(1, std::memory_order_relaxed);
    return attempt;
}

void UpstreamQuery::on_udp_readable(UdpAttempt& attempt) {
    const SocketAddress& want = upstreams_.at(static_cast<size_t>(attempt.upstream)).address;
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
        sockaddr_storage from{};
        socklen_t from_len = sizeof from;
        const ssize_t n = recvfrom(attempt.fd, tls_datagram, sizeof tls_datagram, 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_len);
        if (n < 0) return;  // EAGAIN, or an error we wait out
        const dns::Bytes msg(tls_datagram, static_cast<size_t>(n));
        if (!same_endpoint(from, from_len, want) ||
            !dns::answers_question(msg, attempt.id, question_.wire())) {
            // Forged or stray: the real answer may still come, so keep waiting.
            bump(counters_.dropped_mismatched);
            continue;
        }
        // This attempt is answered; whatever comes next, its socket is done.
        close_attempt(attempt);
        on_answer(msg, attempt.upstream, attempt.sent_at_us, false);
        return;  // on_answer moved on (retry, TCP, or finished and destroyed us)
    }
}

void UpstreamQuery::close_tcp() {
    if (tcp_fd_ < 0) return;
    loop_.forget(tcp_registration_);
    close(tcp_fd_);
    tcp_fd_ = -1;
    tcp_state_ = TcpState::Idle;
}

void UpstreamQuery::start_tcp(int upstream) {
    // The UDP attempts are answered as far as we care: the answer is too big for UDP.
    for (auto& attempt : udp_) close_attempt(*attempt);
    udp_.clear();
    close_tcp();
    if (tcp_sent_[upstream] >= kMaxTriesPerServer) {  // RFC 9520 §3.1, per transport too
        next_attempt();
        return;
    }
    ++tcp_sent_[upstream];
    bump(counters_.upstream_tcp_retries);
    const SocketAddress& to = upstreams_.at(static_cast<size_t>(upstream)).address;
    tcp_upstream_ = upstream;
    tcp_fd_ = socket(to.family(), SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (tcp_fd_ < 0 || !loop_.add(tcp_fd_, EPOLLOUT, this, tcp_registration_) ||
        (connect(tcp_fd_, to.sa(), to.length) != 0 && errno != EINPROGRESS)) {
        if (tcp_fd_ >= 0) close(tcp_fd_);
        tcp_fd_ = -1;
        bump(counters_.upstream_errors);
        next_attempt();
        return;
    }
    tcp_state_ = TcpState::Connecting;
    // A connection and an exchange: two round trips.
    arm_timer(2 * upstreams_.attempt_timeout_ms(static_cast<size_t>(upstream)));
}

void UpstreamQuery::on_event(uint32_t events) {
    on_tcp_event(events);
}

void UpstreamQuery::on_tcp_event(uint32_t events) {
    auto fail = [this] {
        close_tcp();
        bump(counters_.upstream_errors);
        next_attempt();
    };
    if (tcp_state_ == TcpState::Connecting) {
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(tcp_fd_, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0 || (events & (EPOLLERR | EPOLLHUP))) {
            fail();
            return;
        }
        tcp_id_ = secure_random_u16();
        uint8_t wire[2 + dns::kMaxUpstreamQuery];
        const size_t n =
            dns::write_upstream_query(question_.wire(), tcp_id_, owner_.options().edns_buffer_size,
                                      std::span<uint8_t>(wire + 2, sizeof wire - 2));
        dns::write_u16(wire, static_cast<uint16_t>(n));
        // A fresh connection's send buffer takes a few hundred bytes whole.
        if (send(tcp_fd_, wire, n + 2, MSG_NOSIGNAL) != static_cast<ssize_t>(n + 2)) {
            fail();
            return;
        }
        bump(counters_.upstream_queries);
        upstreams_.at(static_cast<size_t>(tcp_upstream_))
            .queries.fetch_add(1, std::memory_order_relaxed);
        tcp_state_ = TcpState::Reading;
        tcp_buffer_.assign(2, 0);
        tcp_have_ = 0;
        loop_.modify(tcp_registration_, EPOLLIN);
        return;
    }
    // Reading: a 2-byte length, then the message (RFC 1035 §4.2.2).
    for (;;) {
        const ssize_t n =
            recv(tcp_fd_, tcp_buffer_.data() + tcp_have_, tcp_buffer_.size() - tcp_have_, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            fail();
            return;
        }
        tcp_have_ += static_cast<size_t>(n);
        if (tcp_have_ < tcp_buffer_.size()) continue;
        if (tcp_buffer_.size() == 2) {
            const uint16_t length = dns::read_u16(tcp_buffer_.data());
            if (length < dns::kHeaderSize) {
                fail();
                return;
            }
            tcp_buffer_.resize(2 + length);
            continue;
        }
        const dns::Bytes msg(tcp_buffer_.data() + 2, tcp_buffer_.size() - 2);
        if (!dns::answers_question(msg, tcp_id_, question_.wire())) {
            bump(counters_.dropped_mismatched);
            fail();
            return;
        }
        on_answer(msg, tcp_upstream_, 0, true);
        return;
    }
}

void UpstreamQuery::on_answer(dns::Bytes msg, int upstream, uint64_t sent_at_us, bool over_tcp) {
    const auto server = static_cast<size_t>(upstream);
    // One exchange per connection: whatever this answer turns out to be, its socket is done.
    // (`msg` lives in tcp_buffer_, which close_tcp() keeps.)
    if (over_tcp) close_tcp();
    UpstreamServer& from = upstreams_.at(server);
    from.answers.fetch_add(1, std::memory_order_relaxed);
    if (!dns::scan_response(msg, tls_scan)) {
        bump(counters_.upstream_errors);
        from.errors.fetch_add(1, std::memory_order_relaxed);
        next_attempt();
        return;
    }
    if (!over_tcp) {
        upstreams_.record_answer(server, static_cast<uint32_t>(monotonic_us() - sent_at_us),
                                 loop_.now_ms());
    }
    if (tls_scan.header.has(dns::flag::TC) && !over_tcp) {
        start_tcp(upstream);
        return;
    }
    auto prepared = cache::prepare_answer(msg, tls_scan, owner_.options().ttl);
    if (!prepared) {
        bump(counters_.upstream_errors);
        from.errors.fetch_add(1, std::memory_order_relaxed);
        next_attempt();
        return;
    }
    auto answer = std::make_shared<const cache::PreparedAnswer>(std::move(*prepared));
    if (is_final_rcode(answer->rcode)) {
        finish(std::move(answer), upstream);
        return;
    }
    // SERVFAIL, REFUSED, NOTIMP, FORMERR: maybe another upstream knows better.
    bump(counters_.upstream_errors);
    from.errors.fetch_add(1, std::memory_order_relaxed);
    fallback_ = std::move(answer);
    fallback_upstream_ = upstream;
    next_attempt();
}

void UpstreamQuery::finish(std::shared_ptr<const cache::PreparedAnswer> answer, int answered_by) {
    loop_.cancel_timer(timer_);
    close_attempts(answered_by);
    close_tcp();
    if (!answer || !is_final_rcode(answer->rcode)) {
        upstreams_.counters().failures.fetch_add(1, std::memory_order_relaxed);
    }
    owner_.finished(this, std::move(answer));  // destroys this
}

}  // namespace nscache::upstream
