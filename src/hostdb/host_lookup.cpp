// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/host_lookup.h"

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

#include "dns/name.h"
#include "dns/query.h"
#include "upstream/miss_path.h"

namespace nscache::hostdb {
namespace {

constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;
// Lookups in flight on one thread; past this a lookup answers TryAgain at once (the client
// falls back to its own NSS modules).
constexpr size_t kMaxLookups = 16384;

// A resolver cookie: the lookup's id (generation, slot index) with the round (which search
// candidate was asked) and the part (0 or 1) in the low 32 bits. A round can end while its
// upstream question is still in flight (the stale timer serves a part), and the next round may
// ask the same name again: the round tells a late answer to the earlier round, which is
// dropped, from the answer the current round waits for, and keeps the two rounds' waiters
// apart in the inflight table.
constexpr unsigned kIndexBits = 14;
constexpr unsigned kRoundBits = 31 - kIndexBits;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
constexpr uint64_t kRoundMask = (uint64_t{1} << kRoundBits) - 1;
static_assert(kMaxLookups <= (size_t{1} << kIndexBits), "a lookup's slot index must fit");

uint64_t cookie_of(uint64_t id, uint32_t round, size_t part) {
    return (id >> 32) << 32 | (round & kRoundMask) << (kIndexBits + 1) | (id & kIndexMask) << 1 |
           part;
}
uint64_t lookup_of(uint64_t cookie) {
    return (cookie >> 32) << 32 | (cookie >> 1 & kIndexMask);
}
// Rounds wrap at 2^17, far beyond the candidates of one search (resolv.conf allows 6 domains).
bool same_round(uint64_t cookie, uint32_t round) {
    return (cookie >> (kIndexBits + 1) & kRoundMask) == (round & kRoundMask);
}

// A numeric name answers itself (glibc's callers catch most of them before any lookup).
std::optional<HostAnswer> numeric(const std::string& name, int family) {
    HostAnswer r;
    uint8_t a[16];
    if (family != kAfInet6 && inet_pton(AF_INET, name.c_str(), a) == 1) {
        r.ipv4.push_back({a[0], a[1], a[2], a[3]});
    } else if (family != kAfInet && inet_pton(AF_INET6, name.c_str(), a) == 1) {
        std::array<uint8_t, 16> v6;
        std::memcpy(v6.data(), a, 16);
        r.ipv6.push_back(v6);
    } else {
        return std::nullopt;
    }
    r.status = HostStatus::Found;
    r.canonical = name;
    r.ttl = kHostsFileTtl;
    return r;
}

SearchOutcome outcome_of(const HostAnswer& a, bool answered) {
    switch (a.status) {
        case HostStatus::Found:
            return SearchOutcome::Found;
        case HostStatus::NotFound:
            return SearchOutcome::NotFound;
        case HostStatus::NoData:
            return SearchOutcome::NoData;
        case HostStatus::TryAgain:
            break;
    }
    return answered ? SearchOutcome::ServFail : SearchOutcome::Failed;
}

}  // namespace

HostLookup::HostLookup(uint32_t worker_index, EventLoop& loop, upstream::ResolverShared& resolver,
                       WorkerCounters& counters, HostSink& sink,
                       std::shared_ptr<const upstream::Routing> routing, HostLookupOptions options)
    : loop_(loop),
      shared_(resolver),
      sink_(sink),
      counters_(counters),
      options_(std::move(options)),
      queue_(loop),
      resolver_(worker_index, loop, resolver, *this, counters, std::move(routing)),
      hosts_(options_.hosts),
      search_config_(options_.resolv_conf),
      lookups_(kMaxLookups) {}

HostLookup::~HostLookup() {
    lookups_.for_each([this](LookupId, Lookup& l) {
        for (Part& p : l.parts) loop_.cancel_timer(p.stale_timer);
    });
}

void HostLookup::open(std::function<void()> on_hosts_change) {
    hosts_.open(loop_, std::move(on_hosts_change));
}

std::optional<HostAnswer> HostLookup::start(const HostQuery& query, uint64_t cookie) {
    if (query.by_addr && !query.refresh) {
        if (auto r = hosts_.table().by_addr(query.family, query.address.data())) return r;
    } else if (!query.by_addr && !query.refresh) {
        if (auto r = numeric(query.name, query.family)) return r;
        if (auto r = hosts_.table().by_name(query.name, query.family)) return r;
    }
    LookupId id;
    Lookup* l = lookups_.add(id);
    if (l == nullptr) return HostAnswer{};  // TryAgain
    l->query = query;
    l->cookie = cookie;
    l->question.qclass = dns::kClassIN;
    if (query.by_addr) {
        const std::vector<uint8_t> reverse = reverse_name(query.family, query.address.data());
        std::memcpy(l->question.name.bytes, reverse.data(), reverse.size());
        l->question.name.length = static_cast<uint8_t>(reverse.size());
        l->question.hash_with(shared_.cache);
    } else if (query.search && !query.refresh) {
        l->plan.emplace(
            options_.search_config ? *options_.search_config : search_config_.get(loop_.now_ms()),
            query.name);
    } else {
        l->plan.emplace(SearchPlan::single(query.name));
    }
    l->in_start = true;
    ask_next(id);
    l = lookups_.find(id);
    if (l->result) {
        std::optional<HostAnswer> r = std::move(l->result);
        lookups_.remove(id);
        return r;
    }
    l->in_start = false;
    return std::nullopt;
}

void HostLookup::ask_next(LookupId id) {
    Lookup& l = *lookups_.find(id);
    const uint32_t round = ++l.round;
    l.parts.clear();
    if (l.query.by_addr) {
        l.parts.push_back(Part(dns::rtype::PTR));
    } else {
        std::optional<std::string> name = l.plan->next();
        if (!name) {
            HostAnswer r;  // TryAgain (ServFail, Failed): kept nowhere
            const auto ttl = [](uint32_t t) { return t == UINT32_MAX ? 0u : t; };
            switch (l.plan->result()) {
                case SearchOutcome::Found:
                    r = l.found;
                    break;
                case SearchOutcome::NotFound:
                    r.status = HostStatus::NotFound;
                    r.ttl = ttl(l.notfound_ttl);
                    break;
                case SearchOutcome::NoData:
                    r.status = HostStatus::NoData;
                    r.ttl = ttl(l.nodata_ttl);
                    break;
                case SearchOutcome::ServFail:
                case SearchOutcome::Failed:
                    break;
            }
            finish(id, std::move(r));
            return;
        }
        auto wire = dns::name_from_text(*name + ".");
        if (!wire) {
            l.plan->report(SearchOutcome::NotFound);
            ask_next(id);
            return;
        }
        l.candidate = std::move(*name);
        dns::lower_name(wire->view(), l.question.name);
        l.question.hash_with(shared_.cache);  // once per candidate, for both parts
        if (l.query.family != kAfInet6) l.parts.push_back(Part(dns::rtype::A));
        if (l.query.family != kAfInet) l.parts.push_back(Part(dns::rtype::AAAA));
    }
    const size_t parts = l.parts.size();
    for (size_t i = 0; i < parts; ++i) {
        ask_part(id, i);
        // A part answered from the cache may have moved the lookup on, or finished it.
        Lookup* now = lookups_.find(id);
        if (now == nullptr || now->result || now->round != round) return;
    }
}

std::optional<HostAnswer> HostLookup::from_cache(const Lookup& l, size_t part) {
    upstream::Question question = l.question;
    question.qtype = l.parts[part].qtype;
    shared_.cache.lookup_answer(question.cache_key(), loop_.now_ms(), hit_);
    if (hit_.freshness == cache::Freshness::Miss) return std::nullopt;
    return host_answer_from_cache(hit_, question.qtype);
}

bool HostLookup::serve_stale(LookupId id, size_t part, bool looked_up) {
    std::optional<HostAnswer> stale;
    if (!looked_up) {
        stale = from_cache(*lookups_.find(id), part);
    } else if (hit_.freshness != cache::Freshness::Miss) {
        stale = host_answer_from_cache(hit_, lookups_.find(id)->parts[part].qtype);
    }
    if (!stale) return false;
    bump(counters_.stale_served);
    part_done(id, part, std::move(*stale), true);
    return true;
}

void HostLookup::ask_part(LookupId id, size_t part) {
    Lookup& l = *lookups_.find(id);
    upstream::Question question = l.question;
    question.qtype = l.parts[part].qtype;
    bool stale_available = false;
    if (!l.query.refresh) {
        // The DNS pipeline's steps (upstream/miss_path.h), reading the cached records instead
        // of a rendered message: a fresh hit answers (and may start a prefetch); a stale entry
        // (kept only with serve-stale on) is what the part may fall back on.
        shared_.cache.lookup_answer(question.cache_key(), loop_.now_ms(), hit_);
        if (hit_.freshness == cache::Freshness::Fresh) {
            HostAnswer answer = host_answer_from_cache(hit_, question.qtype);
            if (upstream::on_hit(resolver_, question, hit_.prefetch, policy_.prefetch)) {
                bump(counters_.prefetches);
            }
            part_done(id, part, std::move(answer), true);
            return;
        }
        stale_available = hit_.freshness == cache::Freshness::Stale;
        l.parts[part].stale = stale_available;
    }
    // The failure cache (RFC 9520 §3.2) gives a failure at once, so the client's own NSS
    // modules get their turn without a wait, and no prefetch asks again. No NXDOMAIN cut:
    // glibc's answers stay what they were.
    const upstream::MissDecision miss = upstream::decide_miss(
        resolver_, question, stale_available, policy_.serve_expired,
        // The stale entry is the one just read (hit_): not looked up (and copied) again.
        [&] { return serve_stale(id, part, true); }, [] { return false; });
    if (miss.kind == upstream::MissDecision::Kind::Answered) return;
    if (miss.kind == upstream::MissDecision::Kind::Failing) {
        part_done(id, part, HostAnswer{}, false);
        return;
    }
    // A prefetch takes the shared tier's value only when it is fresher than the cache's.
    if (!resolver_.resolve(question, cookie_of(id, l.round, part), l.query.refresh)) {
        part_done(id, part, HostAnswer{}, false);
        return;
    }
    if (stale_available) {
        l.parts[part].stale_timer =
            loop_.add_timer(loop_.now_ms() + policy_.stale_answer_timeout_ms,
                            [this, id, round = l.round, part] { on_stale_timer(id, round, part); });
    }
}

void HostLookup::on_stale_timer(LookupId id, uint32_t round, size_t part) {
    Lookup* l = lookups_.find(id);
    if (l == nullptr || l->round != round || part >= l->parts.size() || l->parts[part].done) {
        return;
    }
    l->parts[part].stale_timer = EventLoop::kNoTimer;
    // Nothing stale any more: wait for the upstream.
    std::optional<HostAnswer> stale = from_cache(*l, part);
    if (!stale) return;
    // As QueryPipeline::on_stale_timer: the upstream query goes on and refreshes the cache;
    // this part needs nothing more of it. Left before the part is done, which may start the
    // next round (even for the same name, which must keep its own waiter).
    upstream::Question question = l->question;
    question.qtype = l->parts[part].qtype;
    resolver_.leave(question, cookie_of(id, round, part));
    bump(counters_.stale_served);
    part_done(id, part, std::move(*stale), true);
}

void HostLookup::deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) {
    const LookupId id = lookup_of(cookie);
    const size_t part = cookie & 1;
    Lookup* l = lookups_.find(id);
    // An earlier round's answer (its part was served stale and the search moved on) is for
    // another name: never this round's.
    if (l == nullptr || !same_round(cookie, l->round) || part >= l->parts.size() ||
        l->parts[part].done) {
        return;
    }
    const auto& answer = outcome.answer;
    const bool usable = answer && (answer->rcode == static_cast<uint8_t>(dns::Rcode::NoError) ||
                                   answer->rcode == static_cast<uint8_t>(dns::Rcode::NxDomain));
    if (usable) {
        part_done(id, part,
                  host_answer_from_cache(answer->view(), l->question.name.view(),
                                         l->parts[part].qtype, 0, false, scratch_),
                  true);
        return;
    }
    // As QueryPipeline::deliver: no usable answer, and serve-stale on (a stale entry was
    // kept): the stale entry, if it is still there.
    if (l->parts[part].stale && serve_stale(id, part)) return;
    part_done(id, part, HostAnswer{}, answer != nullptr);
}

void HostLookup::part_done(LookupId id, size_t part, HostAnswer answer, bool answered) {
    Lookup& l = *lookups_.find(id);
    Part& p = l.parts[part];
    p.done = true;
    loop_.cancel_timer(p.stale_timer);
    p.answered = answered;
    p.answer = std::move(answer);
    for (const Part& other : l.parts) {
        if (!other.done) return;
    }
    candidate_done(id);
}

void HostLookup::candidate_done(LookupId id) {
    Lookup& l = *lookups_.find(id);
    HostAnswer answer = l.parts.size() == 2 ? combine_answers(l.parts[0].answer, l.parts[1].answer)
                                            : l.parts[0].answer;
    bool answered = false;
    for (const Part& p : l.parts) answered = answered || p.answered;
    if (l.query.by_addr) {
        if (answer.found()) {
            // The address asked is the one address of a by-address answer.
            if (l.query.family == kAfInet) {
                const auto& a = l.query.address;
                answer.ipv4.assign(1, {a[0], a[1], a[2], a[3]});
            } else {
                answer.ipv6.assign(1, l.query.address);
            }
        }
        if (answer.status == HostStatus::TryAgain) answer.ttl = 0;
        finish(id, std::move(answer));
        return;
    }
    answer.answered_name = l.candidate;
    const SearchOutcome outcome = outcome_of(answer, answered);
    if (outcome == SearchOutcome::Found) l.found = answer;
    if (outcome == SearchOutcome::NotFound) l.notfound_ttl = std::min(l.notfound_ttl, answer.ttl);
    if (outcome == SearchOutcome::NoData) l.nodata_ttl = std::min(l.nodata_ttl, answer.ttl);
    l.plan->report(outcome);
    ask_next(id);
}

void HostLookup::finish(LookupId id, HostAnswer answer) {
    Lookup& l = *lookups_.find(id);
    if (l.in_start) {
        l.result = std::move(answer);
        return;
    }
    const uint64_t cookie = l.cookie;
    lookups_.remove(id);
    sink_.host_done(cookie, answer);
}

}  // namespace nscache::hostdb
