#include "upstream/upstream_set.h"

#include <algorithm>

#include "common/log.h"

namespace nscache::upstream {
namespace {

constexpr uint32_t kUnmeasuredTimeoutMs = 400;
constexpr uint32_t kMinAttemptTimeoutMs = 100;
constexpr uint32_t kMaxAttemptTimeoutMs = 1000;

}  // namespace

UpstreamSet::UpstreamSet(const std::vector<SocketAddress>& addresses) {
    for (const auto& a : addresses) servers_.push_back(std::make_shared<UpstreamServer>(a));
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
        const uint32_t rtt = servers_[i]->srtt_us.load(std::memory_order_relaxed) >>
                             std::min<uint64_t>(idle / kRttDecayMs, 31);
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
    return std::clamp<uint32_t>(srtt * 4 / 1000 + 50, kMinAttemptTimeoutMs, kMaxAttemptTimeoutMs);
}

void UpstreamSet::record_answer(size_t i, uint32_t rtt_us, uint64_t now_ms) {
    UpstreamServer& s = *servers_[i];
    s.srtt_updated_ms.store(now_ms, std::memory_order_relaxed);
    s.consecutive_failures.store(0, std::memory_order_relaxed);
    const uint32_t sample = std::max<uint32_t>(rtt_us, 1);
    if (s.down.exchange(false, std::memory_order_relaxed)) {
        // Back from the dead: its old RTT (inflated by timeouts) says nothing any more.
        s.srtt_us.store(sample, std::memory_order_relaxed);
        const uint64_t since = s.down_since_ms.load(std::memory_order_relaxed);
        log_info("upstream %s is up: it answers again after %llu s marked down",
                 s.address.to_string().c_str(),
                 static_cast<unsigned long long>(now_ms > since ? (now_ms - since) / 1000 : 0));
        return;
    }
    const uint32_t old = s.srtt_us.load(std::memory_order_relaxed);
    // Exponential smoothing with weight 1/8, as TCP's SRTT (RFC 6298).
    const uint32_t next = old == 0 ? sample : old - old / 8 + sample / 8;
    s.srtt_us.store(std::max<uint32_t>(next, 1), std::memory_order_relaxed);
}

void UpstreamSet::record_timeout(size_t i, uint64_t now_ms) {
    UpstreamServer& s = *servers_[i];
    s.srtt_updated_ms.store(now_ms, std::memory_order_relaxed);
    s.timeouts.fetch_add(1, std::memory_order_relaxed);
    // A timeout counts as a slow answer: the smoothed RTT doubles (at least to the wait that
    // expired), so the next query prefers another upstream before this one is marked down.
    const uint32_t old = s.srtt_us.load(std::memory_order_relaxed);
    const uint32_t floor = attempt_timeout_ms(i) * 1000;
    s.srtt_us.store(std::min<uint32_t>(std::max(old * 2, floor), kMaxAttemptTimeoutMs * 1000 * 2),
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
