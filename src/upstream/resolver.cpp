#include "upstream/resolver.h"

#include "upstream/probe.h"
#include "upstream/upstream_query.h"

namespace nscache::upstream {
namespace {

constexpr uint64_t kProbeIntervalMs = 1000;

}  // namespace

Resolver::Resolver(uint32_t worker, EventLoop& loop, ResolverShared& shared, CompletionSink& sink,
                   WorkerCounters& counters)
    : worker_(worker),
      loop_(loop),
      shared_(shared),
      sink_(sink),
      counters_(counters),
      udp_pool_(loop, counters, shared.options.udp_pool),
      streams_(
          loop, counters, shared.tls,
          StreamOptions{shared.options.stream_idle_timeout_ms, shared.options.edns_buffer_size}) {
    // One worker probes upstreams marked down, so each gets one probe a second, not N.
    if (worker_ == 0) {
        for (size_t i = 0; i < shared_.upstreams.size(); ++i) {
            UpstreamServer& server = shared_.upstreams.at(i);
            StreamConnection* tls =
                server.tls ? streams_.tls(&server, server.address, server.tls_peer) : nullptr;
            probes_.push_back(std::make_unique<UpstreamProbe>(
                loop_, shared_.upstreams, i, shared_.options.edns_buffer_size, tls));
        }
        schedule_probes();
    }
}

Resolver::~Resolver() {
    loop_.cancel_timer(probe_timer_);
}

void Resolver::schedule_probes() {
    probe_timer_ = loop_.add_timer(loop_.now_ms() + kProbeIntervalMs, [this] {
        probe_timer_ = EventLoop::kNoTimer;
        for (size_t i = 0; i < probes_.size(); ++i) {
            if (shared_.upstreams.at(i).down.load(std::memory_order_relaxed)) probes_[i]->send();
        }
        schedule_probes();
    });
}

bool Resolver::resolve(const Question& question, uint64_t cookie) {
    std::string key = question.key();
    const Waiter waiter{worker_, cookie};
    switch (shared_.inflight.join(key, &waiter)) {
        case JoinResult::Full:
            return false;
        case JoinResult::Joined:
            bump(counters_.coalesced);
            return true;
        case JoinResult::Leader:
            if (start(question, key)) return true;
            fail_waiters(key, &waiter);
            return false;
    }
    return false;
}

void Resolver::refresh(const Question& question) {
    std::string key = question.key();
    if (shared_.inflight.join(key, nullptr) == JoinResult::Leader && !start(question, key)) {
        fail_waiters(key, nullptr);
    }
}

bool Resolver::failing(const Question& question, FailureReason* reason) {
    return shared_.failures.failing(question.key(), loop_.now_ms(), reason);
}

void Resolver::leave(const Question& question, uint64_t cookie) {
    shared_.inflight.leave(question.key(), Waiter{worker_, cookie});
}

bool Resolver::start(const Question& question, std::string key) {
    if (queries_.size() >= shared_.options.max_outstanding) {
        bump(counters_.overload_servfail);
        return false;
    }
    auto query = std::make_unique<UpstreamQuery>(*this, loop_, shared_, shared_.upstreams,
                                                 counters_, question, std::move(key));
    UpstreamQuery* raw = query.get();
    queries_.emplace(raw, std::move(query));
    raw->start();  // never finishes synchronously: failures wait for a timer
    return true;
}

void Resolver::fail_waiters(const std::string& key, const Waiter* except) {
    // Others may have joined between our join and now (from other workers, or none at all).
    const ResolveOutcome failed{};
    for (const Waiter& w : shared_.inflight.finish(key)) {
        if (except != nullptr && w.worker == except->worker && w.cookie == except->cookie) continue;
        shared_.queues[w.worker]->push(w.cookie, failed);
    }
}

void Resolver::finished(UpstreamQuery* query, std::shared_ptr<const cache::PreparedAnswer> answer) {
    // Into the cache before the waiters are taken: a query arriving in between finds the
    // cache entry, one arriving before joined the waiters. None goes upstream again.
    if (answer && answer->ttl > 0) {
        shared_.cache.insert(query->question().cache_key(), *answer, loop_.now_ms());
    }
    const FailureReason reason = query->failure_reason();
    if (!answer) {
        // RFC 9520 §3.2: remember that no upstream answered, so the next queries for it are
        // answered at once instead of waiting out another round.
        shared_.failures.record(query->key(), reason, loop_.now_ms());
    } else if (answer->rcode <= static_cast<uint8_t>(dns::Rcode::NxDomain)) {
        shared_.failures.clear(query->key());
    }
    std::vector<Waiter> waiters = shared_.inflight.finish(query->key());
    const ResolveOutcome outcome{std::move(answer), reason};
    queries_.erase(query);  // destroys the query; nothing of it is used below
    for (const Waiter& w : waiters) {
        if (w.worker == worker_) {
            sink_.deliver(w.cookie, outcome);
        } else {
            shared_.queues[w.worker]->push(w.cookie, outcome);
        }
    }
}

}  // namespace nscache::upstream
