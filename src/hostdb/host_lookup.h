// SPDX-License-Identifier: BSD-3-Clause
// One thread's host lookups, as `hosts: files dns` answers them: a numeric name answers
// itself, then /etc/hosts, then DNS through the shared cache and this thread's own Resolver
// (never glibc's resolver, which would ask nscd, that is: us), trying the names of
// resolv.conf's search list in res_search's order, A and AAAA at once for AF_UNSPEC as
// glibc's dns module asks them. Both fronts (the NSS module's socket and the nscd socket) use
// it. Everything here runs on the owning thread's event loop; deliveries from other workers
// come through completion_queue().
//
// Answers from the cache are read from the cached records themselves (cache::Cache::
// lookup_answer, host_answer_from_cache): no DNS message is rendered and parsed back. The
// cache rules of the DNS pipeline (upstream/miss_path.h, the steps QueryPipeline takes too)
// apply to glibc alike, which is the one change in what glibc sees: a popular entry near
// expiry is prefetched; with serve-stale on (the cache keeps expired entries only then) a
// stale entry answers when the upstreams fail, are all down, or the question is in the
// failure cache, or at once with serve-expired, with the stale TTL a DNS client gets
// (cache::kStaleAnswerTtl), or when the upstream has not answered within the
// stale-answer-timeout (RFC 8767 §5's client response timer). What is not applied to glibc:
// the NXDOMAIN cut (RFC 8020), which the DNS pipeline alone applies.
//
// Completion contract (the same as the DNS pipeline's): what is known at once (a numeric
// name, /etc/hosts, cache hits, a stale answer served at once, a failure-cache hit) is
// start()'s return value; anything that waits for an upstream is delivered later, exactly
// once, through HostSink::host_done from the loop, never from inside start() (the Resolver
// never delivers from inside resolve(): upstream/forwarder.h).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/slot_table.h"
#include "hostdb/host_answer.h"
#include "hostdb/hosts_file.h"
#include "hostdb/search_list.h"
#include "upstream/completion.h"
#include "upstream/forwarding_settings.h"
#include "upstream/resolver.h"

namespace nscache::hostdb {

struct HostQuery {
    bool by_addr = false;
    std::string name;  // by name: as the program asked it
    int family = 0;    // by name: 2, 10 or 0 (both); by address: 2 or 10
    std::array<uint8_t, 16> address{};
    // Apply resolv.conf's search list (the nscd front; the NSS module searches itself).
    bool search = true;
    // Prefetch: ask upstream for `name` as is, past the cache, /etc/hosts and the search list.
    bool refresh = false;
};

// Implemented by a front: receives the answer to a lookup that did not finish at once.
class HostSink {
  public:
    virtual void host_done(uint64_t cookie, const HostAnswer& answer) = 0;

  protected:
    ~HostSink() = default;
};

// The cache rules a reload may change (config keys prefetch, serve-expired and
// stale-answer-timeout), as the DNS pipeline reads them.
using HostCachePolicy = upstream::CachePolicy;

struct HostLookupOptions {
    HostsFile::Paths hosts;
    std::string resolv_conf = "/etc/resolv.conf";
    // Tests: this search configuration instead of resolv.conf's (glibc keeps the first one
    // res_ninit read, LOCALDOMAIN included, for the process's life).
    std::optional<SearchConfig> search_config;
};

class HostLookup final : public upstream::CompletionSink {
  public:
    // `worker_index`: this thread's index among the queues of resolver.queues.
    HostLookup(uint32_t worker_index, EventLoop& loop, upstream::ResolverShared& resolver,
               WorkerCounters& counters, HostSink& sink,
               std::shared_ptr<const upstream::Routing> routing, HostLookupOptions options = {});
    ~HostLookup();

    // On the loop's thread, before lookups: reads /etc/hosts and starts watching it;
    // `on_hosts_change` runs after every later reload (fronts flush what they published).
    void open(std::function<void()> on_hosts_change);
    upstream::CompletionQueue& completion_queue() { return queue_; }
    // On the loop's thread: lookups started from now on go by `routing` and `options` (a
    // reload); those under way finish as they began.
    void apply(std::shared_ptr<const upstream::Routing> routing,
               const upstream::ResolverOptions& options, HostCachePolicy policy = {}) {
        resolver_.apply(std::move(routing), options);
        policy_ = policy;
    }
    // Drains the completion queue: pass as the loop's on_wake.
    void drain() { queue_.drain(*this); }

    // The answer when it is known at once (numeric name, /etc/hosts, cache hits); otherwise
    // nullopt, and host_done(cookie, ...) follows exactly once, later, from the loop.
    std::optional<HostAnswer> start(const HostQuery& query, uint64_t cookie);

    void deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) override;

  private:
    struct Part {
        uint16_t qtype = 0;
        bool done = false;
        bool answered = false;  // an upstream (or the cache) gave a DNS answer
        bool stale = false;     // the cache held a stale entry when it was asked
        HostAnswer answer;
        // Serve-stale's client response timer while the upstream is asked (RFC 8767 §5).
        EventLoop::TimerHandle stale_timer = EventLoop::kNoTimer;

        explicit Part(uint16_t type) : qtype(type) {}
    };
    struct Lookup {
        HostQuery query;
        uint64_t cookie = 0;
        std::optional<SearchPlan> plan;
        std::string candidate;        // the name being asked, text
        upstream::Question question;  // the name being asked, wire (qtype set per part)
        std::vector<Part> parts;
        uint32_t round = 0;  // bumped per candidate asked; in the resolver cookies
        bool in_start = false;
        std::optional<HostAnswer> result;
        // By name: the tries' answers the search's outcome is made of (RFC 2308: a negative
        // outcome is kept no longer than the shortest negative TTL that made it).
        HostAnswer found;
        uint32_t notfound_ttl = UINT32_MAX;
        uint32_t nodata_ttl = UINT32_MAX;
    };
    using LookupId = SlotTable<Lookup>::Id;

    // Asks the next candidate, or finishes the lookup when the search is over.
    void ask_next(LookupId id);
    void ask_part(LookupId id, size_t part);
    void part_done(LookupId id, size_t part, HostAnswer answer, bool answered);
    // The cache's entry for part `part`, fresh or stale (serve-stale); nullopt when none.
    std::optional<HostAnswer> from_cache(const Lookup& l, size_t part);
    // RFC 8767: answers part `part` from its stale entry; false when there is none any more.
    // `looked_up`: hit_ holds the part's entry, read a moment ago.
    bool serve_stale(LookupId id, size_t part, bool looked_up = false);
    // The stale-answer-timeout passed with the upstream still silent: the stale entry now.
    void on_stale_timer(LookupId id, uint32_t round, size_t part);
    void candidate_done(LookupId id);
    void finish(LookupId id, HostAnswer answer);

    EventLoop& loop_;
    upstream::ResolverShared& shared_;
    HostSink& sink_;
    WorkerCounters& counters_;
    HostLookupOptions options_;
    HostCachePolicy policy_;
    upstream::CompletionQueue queue_;
    upstream::Resolver resolver_;
    HostsFile hosts_;
    SearchConfigSource search_config_;
    SlotTable<Lookup> lookups_;
    // The cache entry last read (Cache::lookup_answer's buffer, reused by every lookup), and
    // the buffer an upstream's answer is read in: read at once, never kept across a call out.
    cache::CachedAnswer hit_;
    std::vector<uint8_t> scratch_;
};

}  // namespace nscache::hostdb
