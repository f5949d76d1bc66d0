// SPDX-License-Identifier: BSD-3-Clause
#include "front/host_front.h"

#include <cstdlib>

namespace nscache::front {
namespace {

// A lookup's cookie: the protocol's id (a SlotTable id: generation << 32 | index) with the
// protocol's tag in the low bit of the index, so both the generation and the index survive.
uint64_t cookie_of(uint64_t id, size_t tag) {
    return (id >> 32) << 32 | (id & 0xFFFFFFFFu) << 1 | tag;
}
uint64_t id_of(uint64_t cookie) {
    return (cookie >> 32) << 32 | (cookie & 0xFFFFFFFFu) >> 1;
}

}  // namespace

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

void HostFront::add(Protocol& protocol) {
    if (protocol_count_ == kMaxProtocols) std::abort();  // a programming error
    protocols_[protocol_count_++] = &protocol;
}

std::optional<hostdb::HostAnswer> HostFront::lookup(Protocol& protocol,
                                                    const hostdb::HostQuery& query, uint64_t id) {
    size_t tag = 0;
    while (tag < protocol_count_ && protocols_[tag] != &protocol) ++tag;
    if (tag == protocol_count_) std::abort();  // a protocol never add()ed: a programming error
    return lookup_.start(query, cookie_of(id, tag));
}

void HostFront::host_done(uint64_t cookie, const hostdb::HostAnswer& answer) {
    const size_t tag = cookie & 1;
    if (tag < protocol_count_) protocols_[tag]->host_done(id_of(cookie), answer);
}

void HostFront::begin() {
    loop_.refresh_now();
    lookup_.apply(settings_->routing, settings_->resolver, settings_->cache_policy);
    // The daemon answers /etc/hosts itself: one read per change, told to every protocol.
    lookup_.open([this] {
        for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->hosts_changed();
    });
    for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->on_thread_start();
}

void HostFront::on_wake() {
    upstream::ForwardingSettingsPtr next;
    if (mailbox_.take_latest(next)) {
        lookup_.apply(next->routing, next->resolver, next->cache_policy);
        settings_ = std::move(next);
    }
    lookup_.drain();
    for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->on_wake();
}

void HostFront::start() {
    started_ = true;
    for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->start();
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
    for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->on_stopped();
}

void HostFront::run_on_this_thread() {
    started_ = true;
    for (size_t i = 0; i < protocol_count_; ++i) protocols_[i]->start();
    begin();
}

void HostFront::run_once(int max_wait_ms) {
    loop_.run_once(max_wait_ms, [this] { on_wake(); });
}

}  // namespace nscache::front
