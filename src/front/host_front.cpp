// SPDX-License-Identifier: BSD-3-Clause
#include "front/host_front.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace nscache::front {

HostFront::HostFront(upstream::ResolverShared& resolver, WorkerCounters& counters,
                     uint32_t worker_index, upstream::ForwardingSettingsPtr settings,
                     HostFrontOptions options, const Clock& clock)
    : counters_(counters),
      loop_(clock),
      settings_(std::move(settings)),
      mailbox_(loop_),
      lookup_(worker_index, loop_, resolver, counters, *this, settings_->routing,
              std::move(options.lookup)) {}

HostFront::~HostFront() {
    // Never the protocols' hooks here: they may be gone already (stop() is the orderly way).
    if (thread_.joinable()) {
        loop_.request_stop();
        thread_.join();
    }
}

void HostFront::add(Protocol& protocol, size_t max_per_user) {
    if (protocol_count_ == kMaxProtocols) std::abort();  // a programming error
    Share& share = shares_[protocol_count_++];
    share.protocol = &protocol;
    share.max_per_user = max_per_user;
}

size_t HostFront::tag_of(const Protocol& protocol) const {
    size_t tag = 0;
    while (tag < protocol_count_ && shares_[tag].protocol != &protocol) ++tag;
    if (tag == protocol_count_) std::abort();  // a protocol never add()ed: a programming error
    return tag;
}

size_t HostFront::max_in_flight() const {
    return std::max<size_t>(1, settings_->resolver.max_outstanding / 2);
}

size_t HostFront::user_bound(const Share& share) const {
    // A quarter at most, as a user's share of the connections is by default: a few users at
    // their share still leave the protocol's bound to the others.
    const size_t quarter = std::max<size_t>(1, max_in_flight() / 4);
    return share.max_per_user == 0 ? quarter : std::min(share.max_per_user, quarter);
}

upstream::ResolverOptions HostFront::resolver_options(
    const upstream::ResolverOptions& options) const {
    upstream::ResolverOptions scaled = options;
    const uint64_t total = uint64_t{options.max_outstanding} * std::max<size_t>(protocol_count_, 1);
    scaled.max_outstanding =
        static_cast<uint32_t>(std::min<uint64_t>(total, std::numeric_limits<uint32_t>::max()));
    return scaled;
}

std::optional<hostdb::HostAnswer> HostFront::lookup(Protocol& protocol,
                                                    const hostdb::HostQuery& query, uint64_t id,
                                                    uid_t uid) {
    const size_t tag = tag_of(protocol);
    Share& share = shares_[tag];
    if (share.in_flight >= max_in_flight()) {
        bump(counters_.overload_servfail);
        return hostdb::HostAnswer{};  // TryAgain
    }
    const bool counted = uid != 0;  // root has no share, only the protocol's bound
    if (counted) {
        auto it = share.per_user.find(uid);
        if (it != share.per_user.end() && it->second >= user_bound(share)) {
            return hostdb::HostAnswer{};
        }
    }
    PendingId pending;
    Pending* p = pending_.add(pending);
    if (p == nullptr) return hostdb::HostAnswer{};
    *p = Pending{.tag = tag, .id = id, .uid = uid};
    ++share.in_flight;
    if (counted) ++share.per_user[uid];
    std::optional<hostdb::HostAnswer> answer = lookup_.start(query, pending);
    if (answer) end(pending);
    return answer;
}

void HostFront::end(PendingId id) {
    const Pending p = *pending_.find(id);
    pending_.remove(id);
    Share& share = shares_[p.tag];
    --share.in_flight;
    if (p.uid == 0) return;
    auto it = share.per_user.find(p.uid);
    if (--it->second == 0) share.per_user.erase(it);
}

void HostFront::host_done(uint64_t cookie, const hostdb::HostAnswer& answer) {
    const Pending* p = pending_.find(cookie);
    if (p == nullptr) return;
    const size_t tag = p->tag;
    const uint64_t id = p->id;
    end(cookie);
    shares_[tag].protocol->host_done(id, answer);
}

void HostFront::begin() {
    loop_.refresh_now();
    lookup_.apply(settings_->routing, resolver_options(settings_->resolver),
                  settings_->cache_policy);
    // The daemon answers /etc/hosts itself: one read per change, told to every protocol.
    lookup_.open([this] {
        for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->hosts_changed();
    });
    for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->on_thread_start();
}

void HostFront::on_wake() {
    upstream::ForwardingSettingsPtr next;
    if (mailbox_.take_latest(next)) {
        lookup_.apply(next->routing, resolver_options(next->resolver), next->cache_policy);
        settings_ = std::move(next);
    }
    lookup_.drain();
    for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->on_wake();
}

void HostFront::start() {
    started_ = true;
    for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->start();
    thread_ = std::thread([this] {
        begin();
        loop_.run([this] { on_wake(); });
    });
}

void HostFront::stop() {
    if (!started_) return;
    started_ = false;
    if (thread_.joinable()) {
        loop_.request_stop();
        thread_.join();
    }
    for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->on_stopped();
}

void HostFront::run_on_this_thread() {
    started_ = true;
    for (size_t i = 0; i < protocol_count_; ++i) shares_[i].protocol->start();
    begin();
}

void HostFront::run_once(int max_wait_ms) {
    loop_.run_once(max_wait_ms, [this] { on_wake(); });
}

}  // namespace nscache::front
