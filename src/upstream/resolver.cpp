#include "upstream/resolver.h"

#include "upstream/probe.h"
#include "upstream/upstream_query.h"

namespace nscache::upstream {
namespace {

constexpr uint64_t kProbeIntervalMs = 1000;

}  // namespace

Resolver::Resolver(uint32_t worker, EventLoop& loop, ResolverShared& shared, CompletionSink& sink,
                   WorkerCounters& counters)
    : worker_(worker), loop_(loop), shared_(shared), sink_(sink), counters_(counters) {
    if (shared_.options.shared_cache.enabled()) {
        tier_ = std::make_unique<sharedcache::SharedTier>(loop_, shared_.options.shared_cache,
                                                          shared_.options.ttl, shared_.tier_health,
                                                          counters_, *this);
    }
    // One worker probes upstreams marked down, so each gets one probe a second, not N.
    if (worker_ == 0) {
        for (size_t i = 0; i < shared_.upstreams.size(); ++i) {
            probes_.push_back(std::make_unique<UpstreamProbe>(loop_, shared_.upstreams, i,
                                                              shared_.options.edns_buffer_size));
        }
        schedule_probes();
    }
}

Resolver::~Resolver() {
    loop_.cancel_timer(probe_timer_);
    tier_.reset();  // before the lookups it would report on
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
            if (ask_shared(question, key, false) || start(question, key)) return true;
            fail_waiters(key, &waiter);
            return false;
    }
    return false;
}

void Resolver::refresh(const Question& question) {
    std::string key = question.key();
    if (shared_.inflight.join(key, nullptr) == JoinResult::Leader &&
        !ask_shared(question, key, true) && !start(question, key)) {
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

bool Resolver::ask_shared(const Question& question, const std::string& key, bool refresh) {
    if (!tier_) return false;
    SlotTable<SharedLookup>::Id id;
    SharedLookup* lookup = shared_lookups_.add(id);
    lookup->question = question;
    lookup->key = key;
    if (tier_->lookup(question.cache_key(), id, refresh)) return true;
    shared_lookups_.remove(id);
    return false;
}

void Resolver::shared_lookup_done(uint64_t token,
                                  std::shared_ptr<const cache::PreparedAnswer> answer) {
    SharedLookup* lookup = shared_lookups_.find(token);
    if (lookup == nullptr) return;
    const Question question = lookup->question;
    const std::string key = std::move(lookup->key);
    shared_lookups_.remove(token);
    if (!answer) {
        // Not in the tier, or the tier failed: the question goes upstream as it would have.
        if (!start(question, key)) fail_waiters(key, nullptr);
        return;
    }
    // Another host's answer, checked and counted down by the tier: cached and delivered like
    // an upstream's, and not written back.
    shared_.cache.insert(question.cache_key(), *answer, loop_.now_ms());
    shared_.failures.clear(key);
    deliver_all(key, ResolveOutcome{std::move(answer), FailureReason::NoReachableAuthority});
}

void Resolver::finished(UpstreamQuery* query, std::shared_ptr<const cache::PreparedAnswer> answer) {
    // Into the cache before the waiters are taken: a query arriving in between finds the
    // cache entry, one arriving before joined the waiters. None goes upstream again.
    if (answer && answer->ttl > 0) {
        shared_.cache.insert(query->question().cache_key(), *answer, loop_.now_ms());
        // For the other hosts; SERVFAIL and uncacheable answers are never shared.
        if (tier_) tier_->store(query->question().cache_key(), *answer);
    }
    const FailureReason reason = query->failure_reason();
    if (!answer) {
        // RFC 9520 §3.2: remember that no upstream answered, so the next queries for it are
        // answered at once instead of waiting out another round.
        shared_.failures.record(query->key(), reason, loop_.now_ms());
    } else if (answer->rcode <= static_cast<uint8_t>(dns::Rcode::NxDomain)) {
        shared_.failures.clear(query->key());
    }
    const std::string key = query->key();
    queries_.erase(query);  // destroys the query; nothing of it is used below
    deliver_all(key, ResolveOutcome{std::move(answer), reason});
}

void Resolver::deliver_all(const std::string& key, const ResolveOutcome& outcome) {
    const std::vector<Waiter> waiters = shared_.inflight.finish(key);
    for (const Waiter& w : waiters) {
        if (w.worker == worker_) {
            sink_.deliver(w.cookie, outcome);
        } else {
            shared_.queues[w.worker]->push(w.cookie, outcome);
        }
    }
}

}  // namespace nscache::upstream
