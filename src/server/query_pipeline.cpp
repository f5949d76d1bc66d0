// SPDX-License-Identifier: BSD-3-Clause
#include "server/query_pipeline.h"

#include <cstring>

#include "dns/any_answer.h"
#include "dns/ede.h"
#include "dns/name.h"
#include "dns/padding.h"
#include "upstream/miss_path.h"

namespace nscache::server {
namespace {

using cache::Freshness;
using dns::QueryVerdict;
using dns::Rcode;

constexpr size_t kTcpMaxAnswer = 65535;

constexpr uint16_t rc(Rcode r) {
    return static_cast<uint16_t>(r);
}

// The one question of a client query (upstream/question.h): lower-cased and hashed here,
// once; the cache, coalescing, the failure cache and the upstream query read that hash.
// Inlined: it is on the hit path, once per query (an out-of-line call cost 18 instructions
// a hit in bench/callgrind-hit).
[[gnu::always_inline]] inline upstream::Question question_of(const dns::Query& q,
                                                             const cache::Cache& cache) {
    upstream::Question question;
    dns::lower_name(q.qname, question.name);
    question.qtype = q.qtype;
    question.qclass = q.qclass;
    question.do_bit = q.edns.do_bit;
    question.cd = q.cd();
    question.hash_with(cache);
    return question;
}

dns::ParsedQuery as_parsed(const dns::Query& q) {
    dns::ParsedQuery parsed;
    parsed.verdict = QueryVerdict::Ok;
    parsed.query = q;
    parsed.question_valid = true;
    return parsed;
}

bool usable_answer(const cache::PreparedAnswer& a) {
    return a.rcode == rc(Rcode::NoError) || a.rcode == rc(Rcode::NxDomain);
}

}  // namespace

QueryPipeline::QueryPipeline(ServerShared& shared, EventLoop& loop, upstream::Forwarder& forwarder,
                             WorkerCounters& counters, ReplySender& sender,
                             const Settings& settings)
    : shared_(shared),
      settings_(&settings),
      loop_(loop),
      forwarder_(forwarder),
      counters_(counters),
      sender_(sender),
      scratch_(kTcpMaxAnswer),
      any_parts_{std::vector<uint8_t>(kTcpMaxAnswer), std::vector<uint8_t>(kTcpMaxAnswer)} {}

size_t QueryPipeline::padded(Transport transport, const dns::Edns& edns, std::span<uint8_t> out,
                             size_t length) {
    if (!encrypted(transport) || !edns.padding || length == 0) return length;
    return dns::pad_response(out, length);
}

cache::RenderLimits QueryPipeline::limits_for(Transport transport, const dns::Query& q) const {
    cache::RenderLimits limits;
    limits.server_udp_size = settings_->config.edns_buffer_size;
    limits.max_size = transport != Transport::Udp
                          ? kTcpMaxAnswer
                          : cache::udp_answer_limit(q, settings_->config.edns_buffer_size);
    return limits;
}

size_t QueryPipeline::error_answer(const dns::ParsedQuery& parsed, uint16_t rcode,
                                   std::span<uint8_t> out, uint32_t ede) {
    switch (rcode) {
        case rc(Rcode::FormErr):
            bump(counters_.answers_formerr);
            break;
        case rc(Rcode::ServFail):
            bump(counters_.answers_servfail);
            break;
        case rc(Rcode::NotImp):
            bump(counters_.answers_notimp);
            break;
        case rc(Rcode::Refused):
            bump(counters_.answers_refused);
            break;
        default:
            break;
    }
    return dns::write_error_answer(parsed, rcode, settings_->config.edns_buffer_size, out, ede);
}

HandleResult QueryPipeline::handle(dns::Bytes msg, const ClientOrigin& origin,
                                   std::span<uint8_t> out) {
    HandleResult result = answer(msg, origin, out);
    if (result.reply_length > 0 && encrypted(origin.transport)) {
        // The question was parsed already, its options not: a second look, for encrypted
        // transports only (their crypto costs far more).
        const dns::ParsedQuery parsed = dns::parse_query(msg);
        result.reply_length = padded(origin.transport, parsed.query.edns, out, result.reply_length);
    }
    return result;
}

HandleResult QueryPipeline::answer(dns::Bytes msg, const ClientOrigin& origin,
                                   std::span<uint8_t> out) {
    bump(counters_.queries);
    switch (origin.transport) {
        case Transport::Udp:
            bump(counters_.queries_udp);
            break;
        case Transport::Tcp:
            bump(counters_.queries_tcp);
            break;
        case Transport::Tls:
            bump(counters_.queries_tls);
            break;
        case Transport::Https:
            bump(counters_.queries_https);
            break;
    }
    // Header and question only: whom to answer, and how, is decided before anything else in
    // the message is read. Every reply below is then rate limited, and a refused sender gets
    // no more bytes than it sent.
    dns::ParsedQuery parsed = dns::parse_query_question(msg);
    if (parsed.verdict == QueryVerdict::Ignore) return {};

    const uint64_t now = loop_.now_ms();
    if (origin.transport == Transport::Udp && settings_->rate_limiter &&
        !is_loopback(origin.peer) && !settings_->rate_limiter->allow(origin.peer, now)) {
        bump(counters_.rate_limited);
        if (settings_->config.rate_limit_action == RateLimitAction::Drop) return {};
        // An empty answer with TC=1 sends a real client to TCP, which a spoofer cannot follow.
        dns::peek_query_edns(msg, parsed);
        const size_t length = dns::write_error_answer(parsed, rc(Rcode::NoError),
                                                      settings_->config.edns_buffer_size, out);
        out[2] |= static_cast<uint8_t>(dns::flag::TC >> 8);
        bump(counters_.answers_truncated);
        return {length};
    }
    if (!settings_->access.allows(origin.peer)) {
        dns::peek_query_edns(msg, parsed);
        size_t length = error_answer(parsed, rc(Rcode::Refused), out, dns::ede::Prohibited);
        // Never more bytes than the sender sent: the EDE goes only where it fits.
        if (length > msg.size()) {
            length = dns::write_error_answer(parsed, rc(Rcode::Refused),
                                             settings_->config.edns_buffer_size, out);
        }
        return {length};
    }

    if (parsed.verdict == QueryVerdict::Ok) dns::parse_query_records(msg, parsed);
    switch (parsed.verdict) {
        case QueryVerdict::Ignore:
            return {};
        case QueryVerdict::FormErr:
            return {error_answer(parsed, rc(Rcode::FormErr), out)};
        case QueryVerdict::NotImp:
            return {error_answer(parsed, rc(Rcode::NotImp), out)};
        case QueryVerdict::BadVers:
            return {error_answer(parsed, dns::kRcodeBadVers, out)};
        case QueryVerdict::Ok:
            break;
    }

    const dns::Query& q = parsed.query;
    if (q.qtype == dns::rtype::ANY) return handle_any(parsed, origin, now, out);
    if (!q.rd()) return handle_norec(parsed, origin, now, out);
    const upstream::Question question = question_of(q, shared_.cache);
    const cache::CacheKey key = question.cache_key();
    const cache::RenderLimits limits = limits_for(origin.transport, q);
    const cache::LookupResult hit = shared_.cache.lookup(key, q, now, limits, out, false);
    if (hit.freshness == Freshness::Fresh) {
        bump(counters_.cache_hits);
        if (hit.truncated) bump(counters_.answers_truncated);
        if (upstream::on_hit(forwarder_, question, hit.prefetch, settings_->config.prefetch)) {
            bump(counters_.prefetches);
        }
        return {hit.length};
    }
    bump(counters_.cache_misses);

    const bool stale_available = hit.freshness == Freshness::Stale && settings_->config.serve_stale;
    const MissCheck miss = check_miss(question, key, q, now, limits, stale_available, out);
    if (miss.kind == MissCheck::Kind::Answered) return {miss.length};
    if (miss.kind == MissCheck::Kind::Failing) {
        return {error_answer(parsed, rc(Rcode::ServFail), out, static_cast<uint16_t>(miss.reason))};
    }

    uint64_t cookie = 0;
    PendingClient* client = add_pending(q, origin, question, cookie);
    if (client == nullptr) {
        bump(counters_.dropped_overload);
        return {};
    }
    if (stale_available) {
        client->stale_timer = loop_.add_timer(now + settings_->config.stale_answer_timeout_ms,
                                              [this, cookie] { on_stale_timer(cookie); });
    }
    if (!forwarder_.resolve(question, cookie)) {
        loop_.cancel_timer(client->stale_timer);
        pending_.remove(cookie);
        return {error_answer(parsed, rc(Rcode::ServFail), out)};
    }
    return {0, true};
}

QueryPipeline::MissCheck QueryPipeline::check_miss(const upstream::Question& question,
                                                   const cache::CacheKey& key, const dns::Query& q,
                                                   uint64_t now, const cache::RenderLimits& limits,
                                                   bool stale_available, std::span<uint8_t> out) {
    size_t length = 0;  // what the callback answering the client rendered into `out`
    auto serve_stale = [&] {
        const cache::LookupResult stale = shared_.cache.lookup(key, q, now, limits, out, true);
        if (stale.length == 0) return false;
        bump(counters_.stale_served);
        counters_.latency[static_cast<size_t>(AnswerSource::stale)].record(0);
        length = stale.length;
        return true;
    };
    // RFC 8020: nothing exists below a name that does not exist. A cached NXDOMAIN for an
    // ancestor answers at once, so a flood of random names under it costs the upstream
    // nothing; only ancestors within the name's own forwarding rule speak for it.
    auto cut = [&] {
        size_t top = key.name.empty() ? 0 : key.name.size() - 1;
        if (settings_->routing) {
            // Routed here once: the Resolver (same Routing) reads this route, not its own.
            const upstream::Route& route = question.route_by(*settings_->routing);
            if (route.kind != upstream::RouteKind::Forward) return false;
            top = route.zone_offset;
        }
        const cache::LookupResult below =
            shared_.cache.lookup_below_nxdomain(key, top, q, now, limits, out);
        if (below.freshness != Freshness::Fresh) return false;
        bump(counters_.nxdomain_cut);
        if (below.truncated) bump(counters_.answers_truncated);
        length = below.length;
        return true;
    };
    const upstream::MissDecision d = upstream::decide_miss(
        forwarder_, question, stale_available, settings_->config.serve_expired, serve_stale, cut);
    if (d.failure_cached) bump(counters_.failure_cached);
    switch (d.kind) {
        case upstream::MissDecision::Kind::Answered:
            return MissCheck{MissCheck::Kind::Answered, length, {}};
        case upstream::MissDecision::Kind::Failing:
            return MissCheck{MissCheck::Kind::Failing, 0, d.reason};
        case upstream::MissDecision::Kind::Ask:
            break;
    }
    return MissCheck{};
}

PendingClient* QueryPipeline::add_pending(const dns::Query& q, const ClientOrigin& origin,
                                          const upstream::Question& question, uint64_t& cookie) {
    PendingClient* client = pending_.add(cookie);
    if (client == nullptr) return nullptr;
    client->transport = origin.transport;
    client->udp_socket = origin.udp_socket;
    client->tcp_connection = origin.tcp_connection;
    client->stream = origin.stream;
    client->peer_len = std::min<socklen_t>(origin.peer_len, sizeof client->peer);
    std::memcpy(&client->peer, origin.peer, client->peer_len);
    client->header = q.header;
    client->edns = q.edns;
    std::memcpy(client->question, q.question.data(), q.question.size());
    client->question_len = static_cast<uint16_t>(q.question.size());
    client->upstream_question = question;
    client->upstream_question.forget_route();  // the client may outlive this Routing
    client->arrived_us = loop_.now_us();
    return client;
}

HandleResult QueryPipeline::handle_norec(const dns::ParsedQuery& parsed, const ClientOrigin& origin,
                                         uint64_t now, std::span<uint8_t> out) {
    const dns::Query& q = parsed.query;
    const upstream::Question question = question_of(q, shared_.cache);
    // Whether a name is cached tells which names other clients asked for, and when (cache
    // snooping): only clients in allow-snoop may learn it.
    const bool snoop = settings_->snoop.allows(origin.peer);
    if (snoop) {
        const cache::LookupResult hit = shared_.cache.lookup(
            question.cache_key(), q, now, limits_for(origin.transport, q), out, false);
        if (hit.freshness == Freshness::Fresh) {
            // No prefetch: a query without RD never causes an upstream query.
            bump(counters_.cache_hits);
            if (hit.truncated) bump(counters_.answers_truncated);
            return {hit.length};
        }
        bump(counters_.cache_misses);
    }
    // What nscache answers itself tells nothing of other clients: every allowed client gets it.
    uint64_t cookie = 0;
    if (add_pending(q, origin, question, cookie) != nullptr) {
        if (forwarder_.resolve_local(question, cookie)) return {0, true};
        pending_.remove(cookie);
    }
    // RFC 1034 §4.3.1: without RD a server answers from what it holds and never recurses.
    // Not an empty NOERROR, which a client would take for "no such data": REFUSED, with
    // EDE 20 (RFC 8914 §4.21) for a miss, EDE 18 for a client that may not look.
    return {error_answer(parsed, rc(Rcode::Refused), out,
                         snoop ? dns::ede::NotAuthoritative : dns::ede::Prohibited)};
}

HandleResult QueryPipeline::handle_any(const dns::ParsedQuery& parsed, const ClientOrigin& origin,
                                       uint64_t now, std::span<uint8_t> out) {
    const dns::Query& q = parsed.query;
    const uint16_t server_udp_size = settings_->config.edns_buffer_size;
    // Other classes (CHAOS, class ANY) have no A or AAAA to give: the HINFO (RFC 8482 §4.2).
    if (q.qclass != dns::kClassIN) return {dns::write_any_answer(q, server_udp_size, out)};
    const bool norec = !q.rd();
    if (norec && !settings_->snoop.allows(origin.peer)) {
        return {error_answer(parsed, rc(Rcode::Refused), out, dns::ede::Prohibited)};
    }
    static constexpr uint16_t kTypes[2] = {dns::rtype::A, dns::rtype::AAAA};
    // One question, hashed once: the name's hash serves both halves.
    const upstream::Question asked = question_of(q, shared_.cache);
    upstream::Question questions[2];
    dns::Bytes parts[2];
    bool stale[2] = {false, false};
    size_t held = 0;
    // Rendered for the ANY query itself (its ID, bits and question), with room for any size:
    // write_any_from_parts applies the transport's limit to what it keeps.
    const cache::RenderLimits whole{kTcpMaxAnswer, server_udp_size};
    for (size_t i = 0; i < 2; ++i) {
        questions[i] = asked;
        questions[i].qtype = kTypes[i];
        const cache::LookupResult hit =
            shared_.cache.lookup(questions[i].cache_key(), q, now, whole, any_parts_[i], false);
        stale[i] = hit.freshness == Freshness::Stale && settings_->config.serve_stale;
        if (hit.freshness != Freshness::Fresh) continue;
        parts[i] = dns::Bytes(any_parts_[i].data(), hit.length);
        ++held;
    }
    const size_t max_size = limits_for(origin.transport, q).max_size;
    uint32_t failure_ede = dns::kNoEde;
    auto answer_from = [&](std::span<const dns::Bytes> from) -> HandleResult {
        bool truncated = false;
        const size_t length =
            dns::write_any_from_parts(q, from, server_udp_size, max_size, out, &truncated);
        if (length == 0) return {error_answer(parsed, rc(Rcode::ServFail), out, failure_ede)};
        if (truncated) bump(counters_.answers_truncated);
        return {length};
    };
    if (held == 2) {
        bump(counters_.cache_hits);
        return answer_from(parts);
    }
    bump(counters_.cache_misses);
    if (norec) {
        // RFC 1034 §4.3.1: what is held, nothing asked (see handle_norec).
        if (held == 0) {
            return {error_answer(parsed, rc(Rcode::Refused), out, dns::ede::NotAuthoritative)};
        }
        return answer_from(
            std::span<const dns::Bytes>(parts[0].empty() ? &parts[1] : &parts[0], 1));
    }
    // Each missing half goes the way its own A or AAAA query would (serve-stale, the NXDOMAIN
    // cut, the failure cache) before it is asked: ANY is no way around them.
    bool failed[2] = {false, false};
    size_t asking = 0;
    for (size_t i = 0; i < 2; ++i) {
        if (!parts[i].empty()) continue;
        const MissCheck miss = check_miss(questions[i], questions[i].cache_key(), q, now, whole,
                                          stale[i], any_parts_[i]);
        if (miss.kind == MissCheck::Kind::Answered) {
            parts[i] = dns::Bytes(any_parts_[i].data(), miss.length);
            // NXDOMAIN (the cut, or stale): the name has no RRsets at all, whatever the other.
            if ((parts[i][3] & 0x0F) == rc(Rcode::NxDomain)) {
                return answer_from(std::span<const dns::Bytes>(&parts[i], 1));
            }
            ++held;
        } else if (miss.kind == MissCheck::Kind::Failing) {
            failed[i] = true;
            failure_ede = static_cast<uint32_t>(miss.reason);
        } else {
            ++asking;
        }
    }
    // Nothing to ask: what is held, less what failed (empty parts).
    if (asking == 0) return answer_from(parts);
    // One half known: the client waits with a copy of it, within the worker's budget for
    // such copies; past it, the known half is the answer now (RFC 8482 §4.1: a subset).
    const size_t ask_one = parts[0].empty() && !failed[0] ? 0 : 1;
    if (asking == 1 && held == 1 && !pending_.can_hold_any(parts[1 - ask_one].size())) {
        bump(counters_.any_partial);
        return answer_from(std::span<const dns::Bytes>(&parts[1 - ask_one], 1));
    }
    // The missing ones go upstream as their own questions (coalesced and cached as such).
    uint64_t cookies[2] = {PendingClient::kNoPartner, PendingClient::kNoPartner};
    PendingClient* clients[2] = {nullptr, nullptr};
    for (size_t i = 0; i < 2; ++i) {
        if (!parts[i].empty() || failed[i]) continue;
        clients[i] = add_pending(q, origin, questions[i], cookies[i]);
        if (clients[i] == nullptr) {
            if (clients[1 - i] != nullptr) pending_.remove(cookies[1 - i]);
            bump(counters_.dropped_overload);
            return {};
        }
    }
    if (asking == 1) {
        PendingClient& waiting = *clients[ask_one];
        if (failed[1 - ask_one]) {
            pending_.any_other_failed(waiting);
        } else {
            pending_.hold_any_other(waiting, parts[1 - ask_one]);  // room checked above
        }
    } else {
        clients[0]->any_partner = cookies[1];
        clients[1]->any_partner = cookies[0];
    }
    bool started = false;
    for (size_t i = 0; i < 2; ++i) {
        if (clients[i] == nullptr) continue;
        if (forwarder_.resolve(questions[i], cookies[i])) {
            started = true;
            continue;
        }
        // Not taken: for the other half, this one failed.
        pending_.remove(cookies[i]);
        const size_t other = 1 - i;
        if (clients[other] != nullptr) {
            clients[other]->any_partner = PendingClient::kNoPartner;
            pending_.any_other_failed(*clients[other]);
        }
        clients[i] = nullptr;
    }
    if (!started) return {error_answer(parsed, rc(Rcode::ServFail), out)};
    return {0, true};
}

void QueryPipeline::deliver_any(uint64_t cookie, PendingClient& client,
                                const upstream::ResolveOutcome& outcome) {
    const dns::Query q = client.query();
    const uint16_t server_udp_size = settings_->config.edns_buffer_size;
    std::vector<uint8_t> mine;
    const auto& answer = outcome.answer;
    if (answer && usable_answer(*answer)) {
        mine.resize(kTcpMaxAnswer);
        bool truncated = false;
        mine.resize(cache::render_answer(answer->view(), q, 0, false,
                                         cache::RenderLimits{kTcpMaxAnswer, server_udp_size}, mine,
                                         &truncated));
    }
    if (client.any_partner != PendingClient::kNoPartner) {
        const uint64_t partner = client.any_partner;
        if (PendingClient* other = pending_.find(partner)) {
            other->any_partner = PendingClient::kNoPartner;
            if (mine.empty()) {
                pending_.any_other_failed(*other);
                pending_.remove(cookie);
                return;
            }
            if (pending_.hold_any_other(*other, mine)) {
                pending_.remove(cookie);
                return;
            }
            // Past the worker's budget for held halves: this half is the client's answer now
            // (RFC 8482 §4.1 allows a subset), and the other's wait ends.
            bump(counters_.any_partial);
            forwarder_.leave(other->upstream_question, partner);
            pending_.remove(partner);
        }
    }
    const dns::Bytes parts[2] = {dns::Bytes(mine), dns::Bytes(client.any_other)};
    bool truncated = false;
    size_t length = dns::write_any_from_parts(
        q, parts, server_udp_size, limits_for(client.transport, q).max_size, scratch_, &truncated);
    if (length == 0) {
        length = error_answer(as_parsed(q), rc(Rcode::ServFail), scratch_);
    } else if (truncated) {
        bump(counters_.answers_truncated);
    }
    record_latency(AnswerSource::upstream, client);
    length = padded(client.transport, client.edns, scratch_, length);
    sender_.send_reply(client, std::span<const uint8_t>(scratch_.data(), length));
    pending_.remove(cookie);
}

size_t QueryPipeline::render_stale(const PendingClient& client) {
    const dns::Query q = client.query();
    const cache::LookupResult stale =
        shared_.cache.lookup(client.upstream_question.cache_key(), q, loop_.now_ms(),
                             limits_for(client.transport, q), scratch_, true);
    return stale.length;
}

void QueryPipeline::on_stale_timer(uint64_t cookie) {
    PendingClient* client = pending_.find(cookie);
    if (client == nullptr) return;
    client->stale_timer = EventLoop::kNoTimer;
    size_t length = render_stale(*client);
    if (length == 0) return;  // nothing stale any more: wait for the upstream
    bump(counters_.stale_served);
    record_latency(AnswerSource::stale, *client);
    length = padded(client->transport, client->edns, scratch_, length);
    sender_.send_reply(*client, std::span<const uint8_t>(scratch_.data(), length));
    // The upstream query goes on and refreshes the cache; this client needs nothing more.
    forwarder_.leave(client->upstream_question, cookie);
    pending_.remove(cookie);
}

void QueryPipeline::deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) {
    PendingClient* client = pending_.find(cookie);
    if (client == nullptr) return;
    if (client->any_partner != PendingClient::kNoPartner || client->any_other_known) {
        deliver_any(cookie, *client, outcome);
        return;
    }
    loop_.cancel_timer(client->stale_timer);
    const dns::Query q = client->query();
    const auto& answer = outcome.answer;
    size_t length = 0;
    AnswerSource source = AnswerSource::upstream;
    if (answer && usable_answer(*answer)) {
        bool truncated = false;
        length = cache::render_answer(answer->view(), q, 0, false, limits_for(client->transport, q),
                                      scratch_, &truncated);
        if (truncated) bump(counters_.answers_truncated);
    } else {
        if (settings_->config.serve_stale) length = render_stale(*client);
        if (length > 0) {
            bump(counters_.stale_served);
            source = AnswerSource::stale;
        } else if (answer) {
            bool truncated = false;
            length = cache::render_answer(answer->view(), q, 0, false,
                                          limits_for(client->transport, q), scratch_, &truncated);
            if (answer->rcode == rc(Rcode::ServFail)) bump(counters_.answers_servfail);
        } else {
            const uint32_t ede = outcome.reason == upstream::FailureReason::Overloaded
                                     ? dns::kNoEde
                                     : static_cast<uint32_t>(outcome.reason);
            length = error_answer(as_parsed(q), rc(Rcode::ServFail), scratch_, ede);
        }
    }
    record_latency(source, *client);
    length = padded(client->transport, client->edns, scratch_, length);
    sender_.send_reply(*client, std::span<const uint8_t>(scratch_.data(), length));
    pending_.remove(cookie);
}

void QueryPipeline::record_latency(AnswerSource source, const PendingClient& client) {
    const uint64_t now = loop_.now_us();
    counters_.latency[static_cast<size_t>(source)].record(
        now > client.arrived_us ? now - client.arrived_us : 0);
}

}  // namespace nscache::server
