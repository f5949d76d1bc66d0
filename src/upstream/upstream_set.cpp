// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/upstream_set.h"

#include <algorithm>

#include "common/log.h"

namespace nscache::upstream {
namespace {

// unbound's numbers: 376 ms for a server never measured, RTT_MIN_TIMEOUT 50 ms.
constexpr uint32_t kUnmeasuredTimeoutMs = 400;
constexpr uint32_t kMinAttemptTimeoutMs = 50;
constexpr uint32_t kMaxAttemptTimeoutMs = 1000;

}  // namespace

namespace {

SocketAddress cleartext_of(const UpstreamAddress& a) {
    SocketAddress c = a.address;
    if (a.tls) c.set_port(53);
    return c;
}

// The address without its port, as the certificate's IP SAN would hold it.
std::string ip_text(const SocketAddress& a) {
    std::string text = a.to_string();
    const size_t colon = text.rfind(':');
    text = text.substr(0, colon);
    if (!text.empty() && text.front() == '[') text = text.substr(1, text.size() - 2);
    return text;
}

}  // namespace

UpstreamServer::UpstreamServer(const UpstreamAddress& a)
    : address(a.address), tls(a.tls), https(a.https), path(a.path), cleartext(cleartext_of(a)) {
    tls_peer.auth_name = a.auth_name;
    tls_peer.ip = ip_text(a.address);
}

UpstreamSet::UpstreamSet(const std::vector<SocketAddress>& addresses) {
    for (const auto& a : addresses) servers_.push_back(std::make_shared<UpstreamServer>(a));
}

UpstreamSet::UpstreamSet(const std::vector<UpstreamAddress>& addresses,
                         const std::vector<SpkiPin>& pins) {
    for (const auto& a : addresses) {
        auto server = std::make_shared<UpstreamServer>(a);
        for (const auto& pin : pins) {
            if (pin.address == a.address) server->tls_peer.spki_sha256 = pin.sha256;
        }
        servers_.push_back(std::move(server));
    }
}

int UpstreamSet::choose(uint64_t tried, uint64_t now_ms) const {
    int best = -1;
    bool best_down = true;
    uint32_t best_rtt = 0;
    for (size_t i = 0; i < servers_.size() && i < 64; ++i) {
        if (tried & (uint64_t{1} << i)) continue;
        const bool down = servers_[i]->down.load(std::memory_order_relaxed);
        const uint64_t updated = servers_[i]->srtt_updated_ms.load(std::memory_order_relaxed);
        const uint64_t idle = now_ms > updated ? now_ms - updated : 0;
        const uint32_t measured = std::max(servers_[i]->srtt_us.load(std::memory_order_relaxed),
                                           servers_[i]->penalty_us.load(std::memory_order_relaxed));
        const uint32_t rtt = measured >> std::min<uint64_t>(idle / kRttDecayMs, 31);
        const bool better =
            best < 0 || (best_down && !down) || (down == best_down && rtt < best_rtt);
        if (better) {
            best = static_cast<int>(i);
            best_down = down;
            best_rtt = rtt;
        }
    }
    return best;
}

bool UpstreamSet::all_down() const {
    return std::all_of(servers_.begin(), servers_.end(),
                       [](const auto& s) { return s->down.load(std::memory_order_relaxed); });
}

uint32_t UpstreamSet::attempt_timeout_ms(size_t i) const {
    const uint32_t srtt = servers_[i]->srtt_us.load(std::memory_order_relaxed);
    if (srtt == 0) return kUnmeasuredTimeoutMs;
    const uint64_t rto_us =
        uint64_t{srtt} + 4 * uint64_t{servers_[i]->rttvar_us.load(std::memory_order_relaxed)};
    return static_cast<uint32_t>(
        std::clamp<uint64_t>(rto_us / 1000, kMinAttemptTimeoutMs, kMaxAttemptTimeoutMs));
}

void UpstreamSet::record_answer(size_t i, uint32_t rtt_us, uint64_t now_ms) {
    UpstreamServer& s = *servers_[i];
    s.srtt_updated_ms.store(now_ms, std::memory_order_relaxed);
    s.consecutive_failures.store(0, std::memory_order_relaxed);
    s.penalty_us.store(0, std::memory_order_relaxed);
    const uint32_t sample = std::max<uint32_t>(rtt_us, 1);
    if (s.down.exchange(false, std::memory_order_relaxed)) {
        // Back from the dead: its old RTT says nothing any more.
        s.srtt_us.store(sample, std::memory_order_relaxed);
        s.rttvar_us.store(sample / 2, std::memory_order_relaxed);
        const uint64_t since = s.down_since_ms.load(std::memory_order_relaxed);
        log_info("upstream %s is up: it answers again after %llu s marked down",
                 s.address.to_string().c_str(),
                 static_cast<unsigned long long>(now_ms > since ? (now_ms - since) / 1000 : 0));
        return;
    }
    // RFC 6298 §2: the first sample sets SRTT and RTTVAR = R/2; later ones smooth them with
    // weights 1/8 and 1/4. (Workers update these without a lock: a lost update costs one
    // sample.)
    const uint32_t old = s.srtt_us.load(std::memory_order_relaxed);
    if (old == 0) {
        s.srtt_us.store(sample, std::memory_order_relaxed);
        s.rttvar_us.store(sample / 2, std::memory_order_relaxed);
        return;
    }
    const uint32_t var = s.rttvar_us.load(std::memory_order_relaxed);
    const uint32_t deviation = old > sample ? old - sample : sample - old;
    s.rttvar_us.store(var - var / 4 + deviation / 4, std::memory_order_relaxed);
    s.srtt_us.store(std::max<uint32_t>(old - old / 8 + sample / 8, 1), std::memory_order_relaxed);
}

void UpstreamSet::record_timeout(size_t i, uint64_t now_ms) {
    UpstreamServer& s = *servers_[i];
    s.srtt_updated_ms.store(now_ms, std::memory_order_relaxed);
    s.timeouts.fetch_add(1, std::memory_order_relaxed);
    // A timeout counts as a slow answer for the choice of server: the penalty doubles (at
    // least to the wait that expired, and to twice the RTT), so the next query prefers
    // another upstream before this one is marked down. The RTT itself, which sets the waits,
    // is left to answers (issue 16 item 11: a loss inflating it made every later retry slow).
    const uint32_t old = std::max(s.penalty_us.load(std::memory_order_relaxed),
                                  s.srtt_us.load(std::memory_order_relaxed));
    const uint32_t floor = attempt_timeout_ms(i) * 1000;
    s.penalty_us.store(
        std::min<uint32_t>(std::max(old * 2, floor), kMaxAttemptTimeoutMs * 1000 * 2),
        std::memory_order_relaxed);
    const uint32_t failures = s.consecutive_failures.fetch_add(1, std::memory_order_relaxed) + 1;
    if (failures >= kDownAfterFailures && !s.down.exchange(true, std::memory_order_relaxed)) {
        s.down_since_ms.store(now_ms, std::memory_order_relaxed);
        log_warning(
            "upstream %s marked down: %u timeouts in a row (other upstreams first; probed "
            "until it answers)",
            s.address.to_string().c_str(), failures);
    }
}

}  // namespace nscache::upstream
