// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/resolver.h"

#include <algorithm>

#include "upstream/local_answer.h"
#include "upstream/probe.h"

namespace nscache::upstream {
namespace {

constexpr uint64_t kProbeIntervalMs = 1000;

}  // namespace

Resolver::Resolver(uint32_t worker, EventLoop& loop, ResolverShared& shared, CompletionSink& sink,
                   WorkerCounters& counters, std::shared_ptr<const Routing> routing)
    : worker_(worker),
      loop_(loop),
      shared_(shared),
      sink_(sink),
      counters_(counters),
      routing_(std::move(routing)),
      options_(shared.options),
      query_options_(query_options_of(shared.options)),
      udp_pool_(loop, counters, shared.options.udp_pool),
      streams_(
          loop, counters, shared.tls,
          StreamOptions{shared.options.stream_idle_timeout_ms, shared.options.edns_buffer_size}) {
    // [shared-cache] is read at start only (a reload keeps it): the tier's settings live in
    // the shared options, which outlive every Resolver.
    if (shared_.options.shared_cache.enabled()) {
        tier_ = std::make_unique<sharedcache::SharedTier>(loop_, shared_.options.shared_cache,
                                                          options_.ttl, shared_.tier_health,
                                                          counters_, *this);
    }
    // One worker probes upstreams marked down, so each gets one probe a second, not N.
    if (worker_ == 0) {
        rebuild_probes();
        schedule_probes();
    }
}

void Resolver::apply(std::shared_ptr<const Routing> routing, const ResolverOptions& options) {
    routing_ = std::move(routing);
    options_ = options;
    query_options_ = query_options_of(options);
    std::vector<const UpstreamServer*> servers;
    for (const ForwardRule& rule : routing_->rules()) {
        for (size_t i = 0; i < rule.upstreams->size(); ++i)
            servers.push_back(&rule.upstreams->at(i));
    }
    if (worker_ == 0) rebuild_probes();  // first: an old probe may still hold a connection
    streams_.forget_others(servers);
}

// One probe per distinct server, however many rules name it.
void Resolver::rebuild_probes() {
    probes_.clear();
    std::vector<const UpstreamServer*> seen;
    for (const ForwardRule& rule : routing_->rules()) {
        for (size_t i = 0; i < rule.upstreams->size(); ++i) {
            UpstreamServer& server = rule.upstreams->at(i);
            if (std::find(seen.begin(), seen.end(), &server) != seen.end()) continue;
            seen.push_back(&server);
            // Over the transport its queries take: a tcp-only rule's server may not answer UDP.
            MessageStream* stream = nullptr;
            if (server.tls) {
                stream = streams_.encrypted(rule.upstreams->shared(i));
            } else if (rule.upstreams->tcp_only()) {
                stream = &streams_.tcp(rule.upstreams->shared(i));
            }
            probes_.push_back(std::make_unique<UpstreamProbe>(loop_, *rule.upstreams, i,
                                                              options_.edns_buffer_size, stream));
        }
    }
}

QueryOptions Resolver::query_options_of(const ResolverOptions& options) {
    return QueryOptions{options.query_timeout_ms, options.tls_auth, options.upstream_cookies,
                        options.edns_buffer_size, options.ttl};
}

const Question& Resolver::hashed(const Question& question, Question& copy) const {
    if (question.name_hash != 0) return question;
    copy = question;
    copy.hash_with(shared_.cache);
    return copy;
}

bool Resolver::all_upstreams_down(const Question& question) const {
    const Route& route = question.route_by(*routing_);
    return route.kind == RouteKind::Forward && route.rule->upstreams->all_down();
}

bool Resolver::answer_locally(const Question& question, const Route& route, uint64_t cookie) {
    cache::PreparedAnswer answer;
    if (question.qclass == kClassChaos) {
        answer = chaos_answer(question, options_.chaos_version, options_.chaos_id);
    } else {
        // Local data is Internet-class data: another class goes upstream like any question.
        if (route.kind == RouteKind::Forward || question.qclass != dns::kClassIN) return false;
        answer = local_answer(*routing_, route, question, options_.local_ttl_s);
    }
    shared_.queues[worker_]->push(
        cookie, ResolveOutcome{std::make_shared<const cache::PreparedAnswer>(std::move(answer))});
    return true;
}

Resolver::~Resolver() {
    loop_.cancel_timer(probe_timer_);
    tier_.reset();  // before the lookups it would report on
}

void Resolver::schedule_probes() {
    probe_timer_ = loop_.add_timer(loop_.now_ms() + kProbeIntervalMs, [this] {
        probe_timer_ = EventLoop::kNoTimer;
        for (auto& probe : probes_) probe->send_if_down();
        schedule_probes();
    });
}

bool Resolver::resolve(const Question& asked, uint64_t cookie, bool refresh) {
    Question copy;
    const Question& question = hashed(asked, copy);
    const Route& route = question.route_by(*routing_);  // once per miss
    if (answer_locally(question, route, cookie)) return true;
    const ForwardRule& rule =
        route.kind == RouteKind::Forward ? *route.rule : routing_->rules().front();
    const Waiter waiter{worker_, cookie};
    switch (shared_.inflight.join(question, &waiter)) {
        case JoinResult::Full:
            return false;
        case JoinResult::Joined:
            bump(counters_.coalesced);
            return true;
        case JoinResult::Leader:
            if ((rule.cache && ask_shared(question, refresh, rule)) || start(question, rule)) {
                return true;
            }
            fail_waiters(question, &waiter);
            return false;
    }
    return false;
}

bool Resolver::resolve_local(const Question& question, uint64_t cookie) {
    return answer_locally(question, question.route_by(*routing_), cookie);
}

void Resolver::refresh(const Question& asked) {
    Question copy;
    const Question& question = hashed(asked, copy);
    const Route& route = question.route_by(*routing_);
    if (route.kind != RouteKind::Forward || question.qclass == kClassChaos) return;
    // RFC 9520 §3.2 holds for background refreshes too (serve-stale, prefetch).
    if (shared_.failures.failing(question.key_hash(), loop_.now_ms(), nullptr)) return;
    if (shared_.inflight.join(question, nullptr) == JoinResult::Leader &&
        !(route.rule->cache && ask_shared(question, true, *route.rule)) &&
        !start(question, *route.rule)) {
        fail_waiters(question, nullptr);
    }
}

bool Resolver::failing(const Question& asked, FailureReason* reason) {
    Question copy;
    return shared_.failures.failing(hashed(asked, copy).key_hash(), loop_.now_ms(), reason);
}

void Resolver::leave(const Question& asked, uint64_t cookie) {
    Question copy;
    shared_.inflight.leave(hashed(asked, copy), Waiter{worker_, cookie});
}

bool Resolver::start(const Question& question, const ForwardRule& rule) {
    if (queries_.size() >= options_.max_outstanding) {
        bump(counters_.overload_servfail);
        return false;
    }
    auto query =
        std::make_unique<UpstreamQuery>(*this, loop_, *rule.upstreams, counters_, question);
    // The query keeps the routing its set belongs to alive across a reload.
    query->keep_alive(routing_, rule.cache, shared_view(rule));
    query->cap_ttls(rule.max_ttl, rule.negative_max_ttl);
    UpstreamQuery* raw = query.get();
    queries_.emplace(raw, std::move(query));
    raw->start();  // never finishes synchronously: failures wait for a timer
    return true;
}

void Resolver::fail_waiters(const Question& question, const Waiter* except) {
    // Others may have joined between our join and now (from other workers, or none at all).
    const ResolveOutcome failed{nullptr, FailureReason::Overloaded};
    for (const Waiter& w : shared_.inflight.finish(question)) {
        if (except != nullptr && w.worker == except->worker && w.cookie == except->cookie) continue;
        shared_.queues[w.worker]->push(w.cookie, failed);
    }
}

std::string_view Resolver::shared_view(const ForwardRule& rule) {
    return rule.shared_view;
}

bool Resolver::ask_shared(const Question& question, bool refresh, const ForwardRule& rule) {
    if (!tier_) return false;
    SlotTable<SharedLookup>::Id id;
    SharedLookup* lookup = shared_lookups_.add(id);
    lookup->question = question;
    lookup->routing = routing_;
    if (tier_->lookup(question.cache_key(), id, refresh, shared_view(rule))) return true;
    shared_lookups_.remove(id);
    return false;
}

void Resolver::shared_lookup_done(uint64_t token,
                                  std::shared_ptr<const cache::PreparedAnswer> answer) {
    SharedLookup* lookup = shared_lookups_.find(token);
    if (lookup == nullptr) return;
    const Question question = lookup->question;
    const std::shared_ptr<const Routing> lookup_routing = std::move(lookup->routing);
    const bool current = in_force(lookup_routing.get());
    shared_lookups_.remove(token);
    if (!answer) {
        // Not in the tier, or the tier failed: the question goes upstream as it would have,
        // by the routing in force now (a reload may have come in between), with the rule
        // resolve() would choose (another class than IN goes to the default rule).
        // A reload that made the name local meanwhile: answered from local data, as
        // resolve() would now.
        const Route& route = question.route_by(*routing_);  // computed again only after a reload
        if (route.kind != RouteKind::Forward && question.qclass == dns::kClassIN) {
            deliver_all(question,
                        ResolveOutcome{std::make_shared<const cache::PreparedAnswer>(
                            local_answer(*routing_, route, question, options_.local_ttl_s))});
            return;
        }
        const ForwardRule& rule =
            route.kind == RouteKind::Forward ? *route.rule : routing_->rules().front();
        if (!start(question, rule)) fail_waiters(question, nullptr);
        return;
    }
    // Another host's answer, checked and counted down by the tier: cached and delivered like
    // an upstream's, and not written back. Asked under a routing a reload has replaced since,
    // it is relayed only: the new route may send the name elsewhere.
    if (current) {
        shared_.cache.insert(question.cache_key(), *answer, loop_.now_ms());
        forget_if_moved(question, lookup_routing.get());
        shared_.failures.clear(question.key_hash());
    }
    deliver_all(question, ResolveOutcome{std::move(answer), FailureReason::NoReachableAuthority});
}

void Resolver::finished(UpstreamQuery* query, std::shared_ptr<const cache::PreparedAnswer> answer) {
    // Into the cache before the waiters are taken: a query arriving in between finds the
    // cache entry, one arriving before joined the waiters. None goes upstream again.
    // A reload that changed the routing meanwhile may have sent this name elsewhere (and
    // flushed what was cached for it): an answer from the old route is relayed, not kept.
    const bool same_routing = in_force(query->set_owner());
    if (answer && answer->ttl > 0 && query->cacheable() && same_routing) {
        shared_.cache.insert(query->question().cache_key(), *answer, loop_.now_ms());
        forget_if_moved(query->question(), query->set_owner());
        // For the other hosts; SERVFAIL and answers not to be cached are never shared.
        if (tier_) tier_->store(query->question().cache_key(), *answer, query->shared_view());
    }
    const FailureReason reason = query->failure_reason();
    if (!same_routing) {
        // The failure cache was cleared for the new routing: an old route's failure is not
        // its business.
    } else if (!answer) {
        // RFC 9520 §3.2: remember that no upstream answered, so the next queries for it are
        // answered at once instead of waiting out another round.
        shared_.failures.record(query->question().key_hash(), reason, loop_.now_ms());
        if (!in_force(query->set_owner())) {
            shared_.failures.clear(query->question().key_hash());  // as above
        }
    } else if (answer->rcode <= static_cast<uint8_t>(dns::Rcode::NxDomain)) {
        shared_.failures.clear(query->question().key_hash());
    }
    const Question question = query->question();
    queries_.erase(query);  // destroys the query; nothing of it is used below
    deliver_all(question, ResolveOutcome{std::move(answer), reason});
}

void Resolver::forget_if_moved(const Question& question, const void* routing) {
    // A reload may have published its routing and flushed between the check and the insert.
    if (!in_force(routing)) shared_.cache.flush_name(question.name.view());
}

bool Resolver::in_force(const void* routing) const {
    const Routing* current = shared_.routing_in_force.load(std::memory_order_acquire);
    return routing == (current != nullptr ? current : routing_.get());
}

void Resolver::deliver_all(const Question& question, const ResolveOutcome& outcome) {
    const std::vector<Waiter> waiters = shared_.inflight.finish(question);
    for (const Waiter& w : waiters) {
        if (w.worker == worker_) {
            sink_.deliver(w.cookie, outcome);
        } else {
            shared_.queues[w.worker]->push(w.cookie, outcome);
        }
    }
}

}  // namespace nscache::upstream
