// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/shared_value.h"

#include <algorithm>
#include <cstring>

#include "cache/render.h"
#include "dns/name.h"
#include "dns/query.h"
#include "dns/response.h"

namespace nscache::sharedcache {
namespace {

constexpr uint8_t kMagic[4] = {'N', 'S', 'C', static_cast<uint8_t>(kFormatVersion)};

void write_u64(uint8_t* p, uint64_t v) {
    for (int i = 7; i >= 0; --i) {
        p[i] = static_cast<uint8_t>(v);
        v >>= 8;
    }
}

uint64_t read_u64(const uint8_t* p) {
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | p[i];
    return v;
}

dns::UpstreamQuestion question_of(const cache::CacheKey& key) {
    return dns::UpstreamQuestion{key.name, key.qtype, key.qclass, (key.flags & cache::kKeyDo) != 0,
                                 (key.flags & cache::kKeyCd) != 0};
}

// The DO bit of the message's OPT record (the TTL field's low half, RFC 6891 §6.1.4).
bool opt_do_bit(dns::Bytes msg, const dns::ScannedResponse& scan) {
    if (!scan.has_opt || scan.opt_rdata_offset < 6) return false;
    return (dns::read_u32(&msg[scan.opt_rdata_offset - 6]) & dns::kEdnsDoBit) != 0;
}

}  // namespace

std::string shared_key(std::string_view prefix, const cache::CacheKey& key, std::string_view view) {
    std::string k(prefix);
    k += kFormatVersion;
    k += ':';
    k += dns::name_to_text(key.name);
    k += ':';
    k += std::to_string(key.qtype);
    k += ':';
    k += std::to_string(key.qclass);
    k += ':';
    k += std::to_string(key.flags);
    if (!view.empty()) {
        k += ":@";
        k += view;
    }
    return k;
}

std::vector<uint8_t> encode_value(const cache::CacheKey& key, const cache::PreparedAnswer& answer,
                                  uint64_t wall_now_ms) {
    // The message is rendered as the answer to a query with our question, ID 0, and an OPT
    // (which carries the DO bit and the upstream's EDE options), so that reading it back is
    // the same check as for an upstream's answer.
    std::vector<uint8_t> question(key.name.begin(), key.name.end());
    question.resize(key.name.size() + 4);
    dns::write_u16(&question[key.name.size()], key.qtype);
    dns::write_u16(&question[key.name.size() + 2], key.qclass);
    dns::Query query;
    query.header.flags = static_cast<uint16_t>(dns::flag::RD | (answer.ad ? dns::flag::AD : 0) |
                                               ((key.flags & cache::kKeyCd) ? dns::flag::CD : 0));
    query.question = question;
    query.qname = key.name;
    query.qtype = key.qtype;
    query.qclass = key.qclass;
    query.edns.present = true;
    query.edns.do_bit = (key.flags & cache::kKeyDo) != 0;
    query.edns.udp_size = 65535;

    const size_t message = dns::kHeaderSize + question.size() + answer.records.size() +
                           dns::kOptRecordSize + answer.ede.size();
    if (message > 65535) return {};
    std::vector<uint8_t> value(kValueHeaderSize + message);
    std::memcpy(value.data(), kMagic, sizeof kMagic);
    write_u64(&value[4], wall_now_ms);
    write_u64(&value[12], wall_now_ms + uint64_t{answer.ttl} * 1000);
    const cache::RenderLimits limits{.max_size = message, .server_udp_size = 65535};
    bool truncated = false;
    const size_t n =
        cache::render_answer(answer.view(), query, 0, false, limits,
                             std::span<uint8_t>(value).subspan(kValueHeaderSize), &truncated);
    if (truncated || n != message) return {};
    return value;
}

DecodedValue decode_value(std::span<const uint8_t> value, const cache::CacheKey& key,
                          const cache::TtlPolicy& policy, uint64_t wall_now_ms, bool refresh) {
    DecodedValue out;
    if (value.size() > kMaxValueBytes) {
        out.verdict = ValueVerdict::Oversized;
        return out;
    }
    if (value.size() < kValueHeaderSize + dns::kHeaderSize ||
        std::memcmp(value.data(), kMagic, sizeof kMagic) != 0) {
        return out;  // Malformed
    }
    const uint64_t written_at = read_u64(&value[4]);
    const uint64_t expires_at = read_u64(&value[12]);
    if (expires_at < written_at) return out;
    if (expires_at <= wall_now_ms + 999) {  // not one whole second left
        out.verdict = ValueVerdict::Expired;
        return out;
    }

    const dns::Bytes msg = value.subspan(kValueHeaderSize);
    const dns::UpstreamQuestion question = question_of(key);
    if (!dns::answers_question(msg, 0, question)) {
        out.verdict = ValueVerdict::Mismatch;
        return out;
    }
    thread_local dns::ScannedResponse scan;
    if (!dns::scan_response(msg, scan)) return out;
    if (scan.header.has(dns::flag::CD) != question.cd || opt_do_bit(msg, scan) != question.do_bit) {
        out.verdict = ValueVerdict::Mismatch;
        return out;
    }
    // The daemon's own TTL rules, as for an answer from upstream: max-ttl bounds whatever the
    // value claims.
    auto answer = cache::prepare_answer(msg, scan, policy);
    // Only answers worth sharing are ever written: NOERROR or NXDOMAIN, cacheable.
    if (!answer || answer->kind == cache::AnswerKind::ServFail || answer->ttl == 0 ||
        answer->rcode > static_cast<uint8_t>(dns::Rcode::NxDomain)) {
        return out;
    }

    // Count the TTLs down by the time since the value was written (never up: a value written
    // "in the future" counts as written now), and never past its absolute expiry.
    const uint64_t elapsed_s = wall_now_ms > written_at ? (wall_now_ms - written_at) / 1000 : 0;
    const uint64_t until_expiry_s = (expires_at - wall_now_ms) / 1000;
    const uint64_t left_by_ttl = answer->ttl > elapsed_s ? answer->ttl - elapsed_s : 0;
    const auto left = static_cast<uint32_t>(std::min(left_by_ttl, until_expiry_s));
    // RFC 8767-style refresh: take it only if another host refreshed it (less than 90% gone).
    const uint64_t lifetime_s = (expires_at - written_at) / 1000;
    if (left == 0 || (refresh && uint64_t{left} * 10 <= lifetime_s)) {
        out.verdict = ValueVerdict::Expired;
        return out;
    }
    for (const uint16_t offset : answer->ttl_offsets) {
        const uint32_t ttl = dns::read_u32(&answer->records[offset]);
        dns::write_u32(&answer->records[offset],
                       static_cast<uint32_t>(ttl > elapsed_s ? ttl - elapsed_s : 0));
    }
    answer->ttl = left;
    out.verdict = ValueVerdict::Answer;
    out.answer = std::move(answer);
    return out;
}

}  // namespace nscache::sharedcache
