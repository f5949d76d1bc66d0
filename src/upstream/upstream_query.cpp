#include "upstream/upstream_query.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/random.h"
#include "dns/response.h"
#include "upstream/resolver.h"

namespace nscache::upstream {
namespace {

// Attempts per query at most, whatever the upstreams do: a query never spins.
constexpr int kMaxAttempts = 12;
// Datagrams read per readiness event before returning to the loop.
constexpr int kMaxReadsPerEvent = 16;

uint64_t monotonic_us() {
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1'000'000 + static_cast<uint64_t>(ts.tv_nsec) / 1000;
}

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
                             WorkerCounters& counters, const Question& question, std::string key)
    : owner_(owner),
      loop_(loop),
      shared_(shared),
      counters_(counters),
      question_(question),
      key_(std::move(key)) {}

UpstreamQuery::~UpstreamQuery() {
    loop_.cancel_timer(timer_);
    close_socket();
}

void UpstreamQuery::start() {
    deadline_ms_ = loop_.now_ms() + shared_.options.query_timeout_ms;
    next_attempt();
}

// One timer per query: the attempt's timeout, or the query's deadline if that comes first.
void UpstreamQuery::arm_timer(uint64_t attempt_timeout_ms) {
    loop_.cancel_timer(timer_);
    const uint64_t at = std::min(loop_.now_ms() + attempt_timeout_ms, deadline_ms_);
    timer_ = loop_.add_timer(at, [this] {
        timer_ = EventLoop::kNoTimer;
        if (loop_.now_ms() >= deadline_ms_) {
            finish(fallback_);
            return;
        }
        on_attempt_timeout();
    });
}

bool UpstreamQuery::open_socket(int type) {
    const SocketAddress& to = shared_.upstreams.at(static_cast<size_t>(upstream_)).address;
    fd_ = socket(to.family(), type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return false;
    const uint32_t events = type == SOCK_DGRAM ? EPOLLIN : EPOLLOUT;
    if (!loop_.add(fd_, events, this, registration_)) {
        close(fd_);
        fd_ = -1;
        return false;
    }
    return true;
}

void UpstreamQuery::close_socket() {
    if (fd_ < 0) return;
    loop_.forget(registration_);  // the socket is ours alone: close() leaves epoll
    close(fd_);
    fd_ = -1;
}

void UpstreamQuery::next_attempt() {
    close_socket();
    if (++attempts_ > kMaxAttempts) {
        arm_timer(deadline_ms_);  // nothing more to try: wait for the deadline
        return;
    }
    upstream_ = shared_.upstreams.choose(tried_);
    if (upstream_ < 0) {
        // Every upstream was tried once. An error answer is as good as it gets; after
        // timeouts only, start another round until the deadline.
        if (fallback_) {
            finish(fallback_);
            return;
        }
        tried_ = 0;
        upstream_ = shared_.upstreams.choose(tried_);
        if (upstream_ < 0) {  // no upstreams at all: the deadline answers
            arm_timer(deadline_ms_);
            return;
        }
    }
    tried_ |= uint64_t{1} << upstream_;
    mode_ = Mode::Udp;
    if (!send_udp()) {
        bump(counters_.upstream_errors);
        // Try the next one on the loop's next turn rather than recursing here.
        loop_.cancel_timer(timer_);
        timer_ = loop_.add_timer(loop_.now_ms(), [this] {
            timer_ = EventLoop::kNoTimer;
            next_attempt();
        });
        return;
    }
    arm_timer(shared_.upstreams.attempt_timeout_ms(static_cast<size_t>(upstream_)));
}

bool UpstreamQuery::send_udp() {
    if (!open_socket(SOCK_DGRAM)) return false;
    UpstreamServer& server = shared_.upstreams.at(static_cast<size_t>(upstream_));
    id_ = secure_random_u16();
    uint8_t wire[dns::kMaxUpstreamQuery];
    const size_t n =
        dns::write_upstream_query(question_.wire(), id_, shared_.options.edns_buffer_size, wire);
    // An unconnected socket: the kernel binds it to a random ephemeral port on this first
    // send, and we see (and count) datagrams from any source instead of the kernel hiding them.
    const ssize_t sent = sendto(fd_, wire, n, 0, server.address.sa(), server.address.length);
    if (sent != static_cast<ssize_t>(n)) return false;
    sent_at_us_ = monotonic_us();
    bump(counters_.upstream_queries);
    server.queries.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void UpstreamQuery::on_attempt_timeout() {
    bump(counters_.upstream_timeouts);
    shared_.upstreams.record_timeout(static_cast<size_t>(upstream_));
    next_attempt();
}

void UpstreamQuery::on_event(uint32_t events) {
    if (mode_ == Mode::Udp) {
        on_udp_readable();
    } else {
        on_tcp_event(events);
    }
}

void UpstreamQuery::on_udp_readable() {
    const SocketAddress& want = shared_.upstreams.at(static_cast<size_t>(upstream_)).address;
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
        sockaddr_storage from{};
        socklen_t from_len = sizeof from;
        const ssize_t n = recvfrom(fd_, tls_datagram, sizeof tls_datagram, 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_len);
        if (n < 0) return;  // EAGAIN, or an error we wait out
        const dns::Bytes msg(tls_datagram, static_cast<size_t>(n));
        if (!same_endpoint(from, from_len, want) ||
            !dns::answers_question(msg, id_, question_.wire())) {
            // Forged or stray: the real answer may still come, so keep waiting.
            bump(counters_.dropped_mismatched);
            continue;
        }
        on_answer(msg, false);
        return;  // on_answer moved on (new attempt, TCP, or finished and destroyed us)
    }
}

void UpstreamQuery::start_tcp() {
    close_socket();
    bump(counters_.upstream_tcp_retries);
    mode_ = Mode::TcpConnecting;
    if (!open_socket(SOCK_STREAM)) {
        bump(counters_.upstream_errors);
        next_attempt();
        return;
    }
    const SocketAddress& to = shared_.upstreams.at(static_cast<size_t>(upstream_)).address;
    if (connect(fd_, to.sa(), to.length) != 0 && errno != EINPROGRESS) {
        bump(counters_.upstream_errors);
        next_attempt();
        return;
    }
    // A connection and an exchange: two round trips.
    arm_timer(2 * shared_.upstreams.attempt_timeout_ms(static_cast<size_t>(upstream_)));
}

void UpstreamQuery::on_tcp_event(uint32_t events) {
    if (mode_ == Mode::TcpConnecting) {
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(fd_, SOL_SOCKET, SO_ERROR, &error, &len);
        if (error != 0 || (events & (EPOLLERR | EPOLLHUP))) {
            bump(counters_.upstream_errors);
            next_attempt();
            return;
        }
        id_ = secure_random_u16();
        uint8_t wire[2 + dns::kMaxUpstreamQuery];
        const size_t n = dns::write_upstream_query(question_.wire(), id_,
                                                   shared_.options.edns_buffer_size,
                                                   std::span<uint8_t>(wire + 2, sizeof wire - 2));
        dns::write_u16(wire, static_cast<uint16_t>(n));
        // A fresh connection's send buffer takes a few hundred bytes whole.
        if (send(fd_, wire, n + 2, MSG_NOSIGNAL) != static_cast<ssize_t>(n + 2)) {
            bump(counters_.upstream_errors);
            next_attempt();
            return;
        }
        bump(counters_.upstream_queries);
        shared_.upstreams.at(static_cast<size_t>(upstream_)).queries.fetch_add(1, std::memory_order_relaxed);
        mode_ = Mode::TcpReading;
        tcp_buffer_.assign(2, 0);
        tcp_have_ = 0;
        loop_.modify(registration_, EPOLLIN);
        return;
    }
    // Reading: a 2-byte length, then the message (RFC 1035 §4.2.2).
    for (;;) {
        const ssize_t n = recv(fd_, tcp_buffer_.data() + tcp_have_, tcp_buffer_.size() - tcp_have_, 0);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n <= 0) {
            bump(counters_.upstream_errors);
            next_attempt();
            return;
        }
        tcp_have_ += static_cast<size_t>(n);
        if (tcp_have_ < tcp_buffer_.size()) continue;
        if (tcp_buffer_.size() == 2) {
            const uint16_t length = dns::read_u16(tcp_buffer_.data());
            if (length < dns::kHeaderSize) {
                bump(counters_.upstream_errors);
                next_attempt();
                return;
            }
            tcp_buffer_.resize(2 + length);
            continue;
        }
        const dns::Bytes msg(tcp_buffer_.data() + 2, tcp_buffer_.size() - 2);
        if (!dns::answers_question(msg, id_, question_.wire())) {
            bump(counters_.dropped_mismatched);
            next_attempt();
            return;
        }
        on_answer(msg, true);
        return;
    }
}

void UpstreamQuery::on_answer(dns::Bytes msg, bool over_tcp) {
    const auto server = static_cast<size_t>(upstream_);
    if (!dns::scan_response(msg, tls_scan)) {
        bump(counters_.upstream_errors);
        next_attempt();
        return;
    }
    if (!over_tcp) shared_.upstreams.record_answer(server, static_cast<uint32_t>(monotonic_us() - sent_at_us_));
    if (tls_scan.header.has(dns::flag::TC) && !over_tcp) {
        start_tcp();
        return;
    }
    auto prepared = cache::prepare_answer(msg, tls_scan, shared_.options.ttl);
    if (!prepared) {
        bump(counters_.upstream_errors);
        next_attempt();
        return;
    }
    auto answer = std::make_shared<const cache::PreparedAnswer>(std::move(*prepared));
    if (is_final_rcode(answer->rcode)) {
        finish(std::move(answer));
        return;
    }
    // SERVFAIL, REFUSED, NOTIMP, FORMERR: maybe another upstream knows better.
    bump(counters_.upstream_errors);
    fallback_ = std::move(answer);
    next_attempt();
}

void UpstreamQuery::finish(std::shared_ptr<const cache::PreparedAnswer> answer) {
    loop_.cancel_timer(timer_);
    close_socket();
    owner_.finished(this, std::move(answer));  // destroys this
}

}  // namespace nscache::upstream
