// SPDX-License-Identifier: BSD-3-Clause
// The forwarding half of a worker: takes cache misses, coalesces them with identical queries
// in flight on any worker, sends one upstream query per distinct question, stores the answer
// in the cache and hands it to every waiter. One Resolver per worker thread, used only from
// that thread; what it shares with the other workers (cache, inflight table, upstream health,
// completion queues) is in ResolverShared.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "cache/answer.h"
#include "cache/cache.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "config/config.h"
#include "sharedcache/shared_tier.h"
#include "upstream/completion.h"
#include "upstream/cookie_jar.h"
#include "upstream/forwarder.h"
#include "upstream/inflight.h"
#include "upstream/question.h"
#include "upstream/resolver_options.h"
#include "upstream/routing.h"
#include "upstream/stream_pool.h"
#include "upstream/tls_client.h"
#include "upstream/udp_socket_pool.h"
#include "upstream/upstream_query.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

// What the resolvers of all workers share. Settings that a reload changes (the routing and
// ResolverOptions) are not here: each Resolver holds its own and swaps them on its thread.
struct ResolverShared {
    ResolverOptions options;  // the options at start (the failure cache's first policy)
    cache::Cache& cache;
    InflightTable inflight;
    std::vector<CompletionQueue*> queues;  // indexed by worker
    FailureCache failures{options.failures};
    const TlsClient* tls = nullptr;         // null: no tls:// upstream
    sharedcache::TierHealth tier_health{};  // the shared tier's nodes, as every thread sees them
    // The routing of the Settings in force, set by the supervisor before it flushes what a
    // reload moved; threads adopt it a moment later. Answers and failures from any other
    // routing are relayed, never kept. Null (tests): each resolver's own routing counts.
    std::atomic<const Routing*> routing_in_force{nullptr};
};

class UpstreamQuery;
class UpstreamProbe;

// Questions come in with their name_hash set (QueryPipeline, HostLookup) or not (tests,
// callers that build one by hand): the Resolver hashes those once, on entry. Each entry point
// routes a question once (Question::route_by), and a route the caller already computed under
// the same Routing is not computed again.
class Resolver final : public Forwarder, public sharedcache::LookupSink, public QueryOwner {
  public:
    Resolver(uint32_t worker, EventLoop& loop, ResolverShared& shared, CompletionSink& sink,
             WorkerCounters& counters, std::shared_ptr<const Routing> routing);
    ~Resolver();

    // Forwarder. resolve() returns false when the question cannot be taken now: too many
    // waiters on it, or max_outstanding queries in flight on this worker.
    bool resolve(const Question& question, uint64_t cookie) override {
        return resolve(question, cookie, false);
    }
    // `refresh`: a prefetch that must come back fresher than the cache's entry (the shared
    // tier's value counts only if it is; see SharedTier::lookup).
    bool resolve(const Question& question, uint64_t cookie, bool refresh);
    bool resolve_local(const Question& question, uint64_t cookie) override;
    void refresh(const Question& question) override;
    void leave(const Question& question, uint64_t cookie) override;
    bool all_upstreams_down(const Question& question) const override;
    bool failing(const Question& question, FailureReason* reason) override;

    // New settings (a reload, a changed resolv.conf): later questions use them; queries in
    // flight finish with what they started with. The owning thread only.
    void apply(std::shared_ptr<const Routing> routing, const ResolverOptions& options);
    const ResolverOptions& options() const { return options_; }
    size_t outstanding() const { return queries_.size(); }

    // QueryOwner: the worker's upstream sockets and options, for its UpstreamQuerys.
    const QueryOptions& query_options() const override { return query_options_; }
    UdpSocketPool& udp_pool() override { return udp_pool_; }
    CookieJar& cookies() override { return cookies_; }
    StreamPool& streams() override { return streams_; }
    // Called by an UpstreamQuery when it is done; destroys it.
    void finished(UpstreamQuery* query,
                  std::shared_ptr<const cache::PreparedAnswer> answer) override;

    // sharedcache::LookupSink: the shared tier's answer to a miss (null: go upstream).
    void shared_lookup_done(uint64_t token,
                            std::shared_ptr<const cache::PreparedAnswer> answer) override;

  private:
    // A leader's question while the shared tier is asked.
    struct SharedLookup {
        Question question;
        std::shared_ptr<const Routing> routing;  // the one in force when it was asked
    };

    // `question` with its name_hash set: itself, or `copy` hashed (once per entry point).
    const Question& hashed(const Question& question, Question& copy) const;
    static QueryOptions query_options_of(const ResolverOptions& options);

    // Whether what was resolved under `routing` may be cached (see routing_in_force).
    bool in_force(const void* routing) const;
    // After an insert checked with in_force(): undoes it if a reload came in between.
    void forget_if_moved(const Question& question, const void* routing);

    // Asks the shared tier first (a local miss costs one Redis round trip before going
    // upstream, and saves the upstream query on a hit); false when there is no tier or it
    // cannot be asked now. Only for questions whose forwarding rule caches.
    bool ask_shared(const Question& question, bool refresh, const ForwardRule& rule);
    // The rule's part of a shared-tier key (ForwardRule::shared_view).
    static std::string_view shared_view(const ForwardRule& rule);
    // Sends the query upstream; false (nothing started) over max_outstanding.
    bool start(const Question& question, const ForwardRule& rule);
    // A question nscache answers itself (local names, local zones, CHAOS): delivered through
    // this worker's queue, never from inside resolve().
    bool answer_locally(const Question& question, const Route& route, uint64_t cookie);
    void rebuild_probes();
    // Ends a question that could not be started: every waiter other than `except` (which the
    // caller answers itself) gets a failure through its worker's queue, never synchronously.
    void fail_waiters(const Question& question, const Waiter* except);
    // Hands `outcome` to every waiter of `question`: this worker's directly, others' by queue.
    void deliver_all(const Question& question, const ResolveOutcome& outcome);
    void schedule_probes();

    const uint32_t worker_;
    EventLoop& loop_;
    ResolverShared& shared_;
    CompletionSink& sink_;
    WorkerCounters& counters_;
    std::shared_ptr<const Routing> routing_;
    ResolverOptions options_;
    QueryOptions query_options_;  // options_'s part that UpstreamQuery reads
    // Before queries_: queries hand their sockets back, and leave their connections, when
    // they are destroyed.
    UdpSocketPool udp_pool_;
    CookieJar cookies_;  // DNS cookies (RFC 7873) of this worker's UDP queries
    StreamPool streams_;
    std::unordered_map<UpstreamQuery*, std::unique_ptr<UpstreamQuery>> queries_;
    std::unique_ptr<sharedcache::SharedTier> tier_;  // null: no [shared-cache]
    SlotTable<SharedLookup> shared_lookups_;
    std::vector<std::unique_ptr<UpstreamProbe>> probes_;
    EventLoop::TimerHandle probe_timer_ = EventLoop::kNoTimer;
};

}  // namespace nscache::upstream
