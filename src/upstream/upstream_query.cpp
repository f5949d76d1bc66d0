// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/upstream_query.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>

#include "common/clock.h"
#include "common/random.h"
#include "dns/response.h"

namespace nscache::upstream {
namespace {

// Attempts per query at most, whatever the upstreams do: a query never spins.
constexpr int kMaxAttempts = 12;
// The wait doubles with each retry up to this.
constexpr uint64_t kMaxAttemptWaitMs = 1500;
// RFC 7873 §8: the extended RCODE BADCOOKIE.
constexpr uint16_t kBadCookie = 23;
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

UpstreamQuery::UpstreamQuery(QueryOwner& owner, EventLoop& loop, UpstreamSet& upstreams,
                             WorkerCounters& counters, const Question& question)
    : owner_(owner), loop_(loop), upstreams_(upstreams), counters_(counters), question_(question) {}

UpstreamQuery::~UpstreamQuery() {
    loop_.cancel_timer(timer_);
    for (size_t k = 0; k < udp_count_; ++k) close_attempt(udp_at(k));
    if (stream_ != nullptr) stream_->cancel(stream_id_, this);
}

void UpstreamQuery::start() {
    deadline_ms_ = loop_.now_ms() + owner_.query_options().query_timeout_ms;
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

void UpstreamQuery::close_attempt(UdpAttempt& attempt, bool answered) {
    if (attempt.socket == nullptr) return;
    owner_.udp_pool().release(attempt.socket, answered);
    attempt.socket = nullptr;
}

void UpstreamQuery::close_attempts(int answered_by) {
    for (size_t k = 0; k < udp_count_; ++k) {
        UdpAttempt& attempt = udp_at(k);
        if (attempt.socket != nullptr && attempt.upstream != answered_by) {
            bump(counters_.upstream_timeouts);
            upstreams_.record_timeout(static_cast<size_t>(attempt.upstream), loop_.now_ms());
        }
        close_attempt(attempt);
    }
    udp_count_ = 0;
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
        if (upstream < 0) {
            // Every server had its three UDP tries: the next transport (RFC 9520 §3.1 counts
            // per transport). Then none is left to ask: late answers or the deadline end it.
            if (!start_tcp_after_timeouts()) arm_timer(deadline_ms_);
            return;
        }
    }
    send_attempt(upstream);
}

bool UpstreamQuery::stream_first(int upstream) const {
    return upstreams_.tcp_only() || upstreams_.at(static_cast<size_t>(upstream)).tls;
}

void UpstreamQuery::send_tcp_attempt(int upstream) {
    StreamConnection& tcp = owner_.streams().tcp(upstreams_.shared(static_cast<size_t>(upstream)));
    // Silence counts as UDP silence does (send_stream's `main`): the next server is tried.
    if (!send_stream(upstream, tcp, true)) {
        bump(counters_.upstream_errors);
        arm_timer(0);
    }
}

void UpstreamQuery::send_attempt(int upstream) {
    tried_ |= uint64_t{1} << upstream;
    ++udp_sent_[upstream];
    UpstreamServer& server = upstreams_.at(static_cast<size_t>(upstream));
    // transport = "tcp": each try is a query on the worker's kept-open connection to the
    // server (a tls:// server keeps its TLS below).
    if (upstreams_.tcp_only() && !server.tls) {
        send_tcp_attempt(upstream);
        return;
    }
    if (server.tls) {
        MessageStream* tls =
            owner_.streams().encrypted(upstreams_.shared(static_cast<size_t>(upstream)));
        // Strict: TLS or nothing. Opportunistic: cleartext while TLS cannot be had, except
        // for DoH, which has no cleartext twin to fall back to.
        const bool cleartext =
            tls == nullptr ||
            (!server.https && owner_.query_options().tls_auth == TlsAuth::Opportunistic &&
             tls->backing_off());
        if (!cleartext) {
            if (!send_stream(upstream, *tls, true)) {
                bump(counters_.upstream_errors);
                arm_timer(0);
            }
            return;
        }
        if (tls == nullptr || server.https || owner_.query_options().tls_auth == TlsAuth::Strict) {
            arm_timer(0);
            return;
        }
    }
    if (udp_count_ == kMaxOpenAttempts) {  // the oldest is given up for the new one
        UdpAttempt& oldest = udp_at(0);
        if (oldest.socket != nullptr) {
            bump(counters_.upstream_timeouts);
            upstreams_.record_timeout(static_cast<size_t>(oldest.upstream), loop_.now_ms());
        }
        close_attempt(oldest);
        udp_head_ = (udp_head_ + 1) % kMaxOpenAttempts;
        --udp_count_;
    }
    if (!send_udp(upstream, udp_at(udp_count_))) {
        bump(counters_.upstream_errors);
        // Try the next one on the loop's next turn rather than recursing here.
        arm_timer(0);
        return;
    }
    ++udp_count_;
    const uint64_t base = upstreams_.attempt_timeout_ms(static_cast<size_t>(upstream));
    // No wait takes more than half the time left, so the next server or transport still has
    // its chance before the deadline (a server never measured waits 400, 800, 1500 ms
    // otherwise: its third UDP try would use up a 2 s query-timeout).
    const uint64_t now = loop_.now_ms();
    const uint64_t left = deadline_ms_ > now ? deadline_ms_ - now : 0;
    arm_timer(std::min({base << std::min(attempts_ - 1, 4), kMaxAttemptWaitMs, left / 2}));
}

bool UpstreamQuery::send_udp(int upstream, UdpAttempt& attempt) {
    UpstreamServer& server = upstreams_.at(static_cast<size_t>(upstream));
    attempt.query = this;
    attempt.upstream = upstream;
    const SocketAddress& to = server.udp_address();
    attempt.socket = owner_.udp_pool().acquire(to.family(), &attempt);
    if (attempt.socket == nullptr) return false;
    attempt.id = secure_random_u16();
    CookieOption cookie;  // none: `upstream-cookies = false` (BIND's send-cookie)
    const bool retry_without_cookie = formerr_retried_ && upstream == formerr_retry_upstream_;
    if (owner_.query_options().upstream_cookies && !retry_without_cookie) {
        cookie = owner_.cookies().option_for(to, loop_.now_ms());
    }
    attempt.cookie_sent = cookie.size > 0;
    std::copy_n(cookie.bytes.begin(), kClientCookieSize, attempt.cookie.bytes.begin());
    uint8_t wire[dns::kMaxUpstreamQuery];
    const size_t n = dns::write_upstream_query(
        question_.wire(), attempt.id, owner_.query_options().edns_buffer_size, wire, cookie.view());
    // An unconnected socket: we see (and count) datagrams from any source instead of the
    // kernel hiding them, and a forgery from anywhere retires the socket.
    const ssize_t sent = sendto(attempt.socket->fd(), wire, n, 0, to.sa(), to.length);
    if (sent != static_cast<ssize_t>(n)) {
        close_attempt(attempt);
        return false;
    }
    attempt.sent_at_us = monotonic_us();
    sent_any_ = true;
    bump(counters_.upstream_queries);
    server.queries.fetch_add(1, std::memory_order_relaxed);
    return true;
}

void UpstreamQuery::on_udp_readable(UdpAttempt& attempt) {
    const SocketAddress& want = upstreams_.at(static_cast<size_t>(attempt.upstream)).udp_address();
    for (int i = 0; i < kMaxReadsPerEvent; ++i) {
        sockaddr_storage from{};
        socklen_t from_len = sizeof from;
        const ssize_t n = recvfrom(attempt.socket->fd(), tls_datagram, sizeof tls_datagram, 0,
                                   reinterpret_cast<sockaddr*>(&from), &from_len);
        if (n < 0) return;  // EAGAIN, or an error we wait out
        const dns::Bytes msg(tls_datagram, static_cast<size_t>(n));
        if (!same_endpoint(from, from_len, want) ||
            !dns::answers_question(msg, attempt.id, question_.wire())) {
            // Forged or stray: the real answer may still come, so keep waiting, but this port
            // is known to someone now and is not used again.
            bump(counters_.dropped_mismatched);
            owner_.udp_pool().taint(attempt.socket);
            continue;
        }
        if (!dns::scan_response(msg, tls_scan)) {
            if (dns::read_u16(msg.data() + 2) & dns::flag::TC) {
                // RFC 1035 §4.2.1 lets a server cut a truncated message mid-record: what it
                // says is "ask over TCP", which a forger could say with a well-formed TC=1
                // answer as well. No RTT sample and no health change from it.
                start_tcp(attempt.upstream);
                return;  // start_tcp moved on (or finished and destroyed us)
            }
            // Its header and question match but the rest does not parse, so its cookie (if
            // any) cannot be checked: taken as an answer, a forger who matched ID and port
            // alone could end the attempt, skew the server's RTT and reset its health. A
            // mismatch like any other; the real answer may still come.
            bump(counters_.dropped_mismatched);
            owner_.udp_pool().taint(attempt.socket);
            continue;
        }
        const CookieVerdict verdict = check_cookie(msg, want, attempt);
        if (verdict == CookieVerdict::Wrong || verdict == CookieVerdict::Missing) {
            // RFC 7873 §5.3: not the answer to our query, whatever its ID says. Someone
            // off the path is guessing on this port: as for other mismatches.
            bump(counters_.upstream_bad_cookies);
            cookie_missing_ = cookie_missing_ || verdict == CookieVerdict::Missing;
            owner_.udp_pool().taint(attempt.socket);
            continue;
        }
        // This attempt is answered: its socket may serve another query.
        close_attempt(attempt, true);
        upstreams_.record_answer(static_cast<size_t>(attempt.upstream),
                                 static_cast<uint32_t>(monotonic_us() - attempt.sent_at_us),
                                 loop_.now_ms());
        on_answer(msg, attempt.upstream, nullptr, true, attempt.cookie_sent);
        return;  // on_answer moved on (retry, TCP, or finished and destroyed us)
    }
}

CookieVerdict UpstreamQuery::check_cookie(dns::Bytes msg, const SocketAddress& from,
                                          const UdpAttempt& attempt) {
    // A query without a cookie expects none back (RFC 7873 §5.3: ignored).
    if (!attempt.cookie_sent) return CookieVerdict::None;
    dns::Bytes option;
    const bool present =
        tls_scan.has_opt &&
        find_cookie_option(msg.subspan(tls_scan.opt_rdata_offset, tls_scan.opt_rdlength), option);
    return owner_.cookies().check(from, attempt.cookie, present, option);
}

void UpstreamQuery::cancel_stream(int answered_by) {
    if (stream_ == nullptr) return;
    stream_->cancel(stream_id_, this);
    stream_ = nullptr;
    // A tls:// upstream's main transport: its silence counts as UDP silence does.
    if (stream_tls_ && stream_upstream_ != answered_by) {
        bump(counters_.upstream_timeouts);
        upstreams_.record_timeout(static_cast<size_t>(stream_upstream_), loop_.now_ms());
    }
}

bool UpstreamQuery::send_stream(int upstream, MessageStream& connection, bool tls) {
    cancel_stream(-1);
    if (!connection.send(question_.wire(), this, stream_id_)) return false;
    stream_ = &connection;
    stream_upstream_ = upstream;
    stream_tls_ = tls;
    stream_after_timeouts_ = false;
    sent_any_ = true;
    upstreams_.at(static_cast<size_t>(upstream)).queries.fetch_add(1, std::memory_order_relaxed);
    // A connection still to be made (and a TLS handshake) takes a round trip or two more.
    const uint64_t base = upstreams_.attempt_timeout_ms(static_cast<size_t>(upstream));
    arm_timer(std::min<uint64_t>(connection.open() ? base << std::min(attempts_ - 1, 4) : 3 * base,
                                 3 * kMaxAttemptWaitMs));
    return true;
}

void UpstreamQuery::start_tcp(int upstream) {
    // The UDP attempts are answered as far as we care: the answer is too big for UDP.
    for (size_t k = 0; k < udp_count_; ++k) close_attempt(udp_at(k));
    udp_count_ = 0;
    if (tcp_sent_[upstream] >= kMaxTriesPerServer) {  // RFC 9520 §3.1, per transport too
        next_attempt();
        return;
    }
    ++tcp_sent_[upstream];
    bump(counters_.upstream_tcp_retries);
    const auto& server = upstreams_.shared(static_cast<size_t>(upstream));
    if (!send_stream(upstream, owner_.streams().tcp(server), false)) {
        bump(counters_.upstream_errors);
        next_attempt();
    }
}

bool UpstreamQuery::start_tcp_after_timeouts() {
    uint64_t skip = 0;  // servers asked over TCP already, tls:// ones (a stream already)
    for (size_t i = 0; i < upstreams_.size() && i < 64; ++i) {
        if (tcp_sent_[i] > 0 || stream_first(static_cast<int>(i))) skip |= uint64_t{1} << i;
    }
    // Issue 16 item 11: UDP lost three times in a row is more likely loss on the path than a
    // dead server (30% loss loses all three tries of one question in 37); TCP retransmits
    // through it. One TCP query per server: the connection does the retrying.
    while (true) {
        const int upstream = upstreams_.choose(skip, loop_.now_ms());
        if (upstream < 0) return false;
        skip |= uint64_t{1} << upstream;
        StreamConnection& tcp =
            owner_.streams().tcp(upstreams_.shared(static_cast<size_t>(upstream)));
        if (tcp.backing_off()) continue;  // its connect failed lately: no use waiting on it
        ++tcp_sent_[upstream];
        bump(counters_.upstream_tcp_fallbacks);
        if (send_stream(upstream, tcp, false)) {
            stream_after_timeouts_ = true;
            return true;
        }
        bump(counters_.upstream_errors);
    }
}

void UpstreamQuery::on_stream_answer(dns::Bytes msg, uint32_t rtt_us) {
    MessageStream* connection = stream_;
    const int upstream = stream_upstream_;
    stream_ = nullptr;
    // A TLS server's RTT, and a server's asked over TCP because UDP got lost (a path that
    // loses all UDP would otherwise never be measured, and every query would wait as long as
    // for an unknown server).
    if (rtt_us > 0 && (stream_tls_ || stream_after_timeouts_)) {
        upstreams_.record_answer(static_cast<size_t>(upstream), rtt_us, loop_.now_ms());
    }
    // Its UDP answers came without the cookie it used to send, and over TCP it answers: it
    // no longer does cookies (a forger could not have made us ask over TCP, since it cannot
    // stop the real UDP answers).
    if (stream_after_timeouts_ && cookie_missing_) {
        owner_.cookies().forget(upstreams_.at(static_cast<size_t>(upstream)).udp_address());
    }
    on_answer(msg, upstream, connection);
}

void UpstreamQuery::on_stream_failed() {
    stream_ = nullptr;
    bump(counters_.upstream_errors);
    next_attempt();
}

void UpstreamQuery::on_stream_refused() {
    stream_ = nullptr;
    bump(counters_.upstream_errors);
    UpstreamServer& from = upstreams_.at(static_cast<size_t>(stream_upstream_));
    from.errors.fetch_add(1, std::memory_order_relaxed);
    // Overloaded or broken (RFC 8484 §4.2.1 leaves it to HTTP): prefer the others, and mark
    // it down when it keeps saying so, as for a server that stops answering.
    upstreams_.record_timeout(static_cast<size_t>(stream_upstream_), loop_.now_ms());
    next_attempt();
}

void UpstreamQuery::on_answer(dns::Bytes msg, int upstream, MessageStream* stream, bool scanned,
                              bool cookie_sent) {
    UpstreamServer& from = upstreams_.at(static_cast<size_t>(upstream));
    from.answers.fetch_add(1, std::memory_order_relaxed);
    if (!scanned && !dns::scan_response(msg, tls_scan)) {
        bump(counters_.upstream_errors);
        from.errors.fetch_add(1, std::memory_order_relaxed);
        // A connection that carried a broken message is not trusted with the next one.
        if (stream != nullptr) stream->reset();
        next_attempt();
        return;
    }
    if (tls_scan.header.has(dns::flag::TC) && stream == nullptr) {
        start_tcp(upstream);
        return;
    }
    if (tls_scan.extended_rcode == kBadCookie && stream == nullptr) {
        // RFC 7873 §5.3: the server wants its cookie (check_cookie kept the new one): asked
        // again at once, once, within the three tries. A second BADCOOKIE moves on, in the end
        // to TCP, which needs no cookie. Never an answer to relay or cache.
        bump(counters_.upstream_errors);
        if (!badcookie_retried_ && udp_sent_[upstream] < kMaxTriesPerServer &&
            attempts_ < kMaxAttempts) {
            badcookie_retried_ = true;
            ++attempts_;
            send_attempt(upstream);
        } else {
            next_attempt();
        }
        return;
    }
    if (cookie_sent && tls_scan.extended_rcode == static_cast<uint16_t>(dns::Rcode::FormErr) &&
        !owner_.cookies().has_server_cookie(from.udp_address())) {
        // Old forwarders and CPE boxes answer FORMERR to an EDNS option they do not know
        // (RFC 6891 §6.1.2 says to ignore it): asked again at once without the cookie, and
        // sent none for a while. Only a server that never sent a cookie: one that did knows
        // the option, and a forged FORMERR cannot turn its cookies off.
        // The server is remembered as cookie-less only once the retry without the cookie is
        // answered otherwise (below): one forged FORMERR, an off-path guess of ID and port,
        // must not turn cookies off for an hour.
        bump(counters_.upstream_errors);
        if (!formerr_retried_ && udp_sent_[upstream] < kMaxTriesPerServer &&
            attempts_ < kMaxAttempts) {
            formerr_retried_ = true;
            formerr_retry_upstream_ = upstream;
            ++attempts_;
            send_attempt(upstream);
            return;
        }
    }
    if (!cookie_sent && stream == nullptr && formerr_retried_ &&
        upstream == formerr_retry_upstream_ &&
        tls_scan.extended_rcode != static_cast<uint16_t>(dns::Rcode::FormErr)) {
        owner_.cookies().refuses_cookies(from.udp_address(), loop_.now_ms());
    }
    cache::TtlPolicy ttl = owner_.query_options().ttl;
    ttl.max_ttl = std::min(ttl.max_ttl, max_ttl_cap_);
    ttl.negative_max_ttl = std::min(ttl.negative_max_ttl, negative_max_ttl_cap_);
    ttl.min_ttl = std::min(ttl.min_ttl, ttl.max_ttl);  // a cap is a cap, whatever min-ttl says
    auto prepared = cache::prepare_answer(msg, tls_scan, ttl);
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
    cancel_stream(answered_by);
    if (!answer || !is_final_rcode(answer->rcode)) {
        upstreams_.counters().failures.fetch_add(1, std::memory_order_relaxed);
    }
    owner_.finished(this, std::move(answer));  // destroys this
}

}  // namespace nscache::upstream
