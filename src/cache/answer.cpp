// SPDX-License-Identifier: BSD-3-Clause
#include "cache/answer.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <limits>
#include <span>
#include <utility>

#include "common/hash.h"
#include "dns/ede.h"
#include "dns/name.h"

namespace nscache::cache {
namespace {

using dns::Rcode;

// RFC 2181 §8: a TTL with the top bit set is to be read as zero.
uint32_t sane_ttl(uint32_t ttl) {
    return ttl > 0x7FFFFFFFu ? 0 : ttl;
}

bool has_soa_in_authority(const dns::ScannedResponse& scan) {
    return std::any_of(scan.records.begin(), scan.records.end(), [](const auto& r) {
        return r.type == dns::rtype::SOA && r.section == dns::Section::Authority;
    });
}

AnswerKind classify(const dns::ScannedResponse& scan, bool& cacheable) {
    const auto rcode = static_cast<Rcode>(scan.extended_rcode);
    cacheable = true;
    if (rcode == Rcode::ServFail) return AnswerKind::ServFail;
    if (rcode == Rcode::NoError && scan.header.ancount > 0) return AnswerKind::Positive;
    if (rcode == Rcode::NoError || rcode == Rcode::NxDomain) {
        // RFC 2308 §5: a negative answer without an SOA says nothing of how long it holds.
        cacheable = has_soa_in_authority(scan);
        return AnswerKind::Negative;
    }
    cacheable = false;  // REFUSED, NOTIMP, FORMERR: about this server, not about the name
    return AnswerKind::Positive;
}

// RFC 2181 §5.2: the records of one RRset (owner, class, type, in one section) have one TTL.
// An upstream that sends them with different TTLs gets the lowest for all. Records are grouped
// by a hash of their RRset (so the work is a sort, whatever the order they came in); a
// collision of two RRsets can only lower a TTL, never raise one.
void unify_rrset_ttls(dns::Bytes msg, const dns::ScannedResponse& scan, PreparedAnswer& a) {
    const size_t n = scan.records.size();
    if (n < 2) return;
    // (RRset hash, record index); on the stack for the usual few records (no allocation per
    // answer, a cache file's million included).
    std::pair<uint64_t, size_t> few[16];
    std::vector<std::pair<uint64_t, size_t>> many;
    if (n > std::size(few)) many.resize(n);
    const std::span<std::pair<uint64_t, size_t>> sets =
        n > std::size(few) ? std::span(many) : std::span(few, n);
    for (size_t i = 0; i < n; ++i) {
        const auto& rec = scan.records[i];
        dns::NameBuffer owner;
        if (!dns::read_name_lower(msg, rec.owner_offset, owner)) return;  // scanned already
        uint8_t key[dns::kMaxNameLength + 5];
        std::memcpy(key, owner.bytes, owner.length);
        dns::write_u16(key + owner.length, rec.type);
        dns::write_u16(key + owner.length + 2, rec.rclass);
        key[owner.length + 4] = static_cast<uint8_t>(rec.section);
        sets[i] = {seeded_hash(0, key, owner.length + 5u), i};
    }
    std::sort(sets.begin(), sets.end());
    for (size_t begin = 0; begin < n;) {
        size_t end = begin + 1;
        while (end < n && sets[end].first == sets[begin].first) ++end;
        if (end - begin > 1) {
            uint32_t lowest = std::numeric_limits<uint32_t>::max();
            for (size_t k = begin; k < end; ++k) {
                lowest = std::min(lowest, dns::read_u32(&a.records[a.ttl_offsets[sets[k].second]]));
            }
            for (size_t k = begin; k < end; ++k) {
                dns::write_u32(&a.records[a.ttl_offsets[sets[k].second]], lowest);
            }
        }
        begin = end;
    }
}

}  // namespace

bool prepare_answer_into(dns::Bytes msg, const dns::ScannedResponse& scan, const TtlPolicy& policy,
                         PreparedAnswer& a) {
    if (scan.extended_rcode > 15 || scan.header.has(dns::flag::TC) || !scan.opt_is_last) {
        return false;
    }
    if (scan.records_end - scan.records_offset > std::numeric_limits<uint16_t>::max()) {
        return false;
    }
    bool cacheable = false;
    a.kind = classify(scan, cacheable);
    a.rcode = static_cast<uint8_t>(scan.extended_rcode);
    a.ad = scan.header.has(dns::flag::AD);
    a.ancount = scan.header.ancount;
    a.nscount = scan.header.nscount;
    a.arcount = static_cast<uint16_t>(scan.header.arcount - (scan.has_opt ? 1 : 0));
    a.records.assign(msg.begin() + static_cast<ptrdiff_t>(scan.records_offset),
                     msg.begin() + static_cast<ptrdiff_t>(scan.records_end));

    const bool negative = a.kind == AnswerKind::Negative;
    uint32_t lifetime = std::numeric_limits<uint32_t>::max();
    a.ttl_offsets.clear();
    a.ttl_offsets.reserve(scan.records.size());
    for (const auto& rec : scan.records) {
        uint32_t ttl = sane_ttl(rec.ttl);
        const bool negative_soa =
            rec.type == dns::rtype::SOA && rec.section == dns::Section::Authority;
        if (negative_soa) {
            // RFC 2308 §3/§5: the negative TTL is the lesser of the SOA's TTL and MINIMUM,
            // and the SOA goes out with that TTL counting down.
            ttl = std::min({ttl, sane_ttl(rec.soa_minimum), policy.negative_max_ttl});
        }
        ttl = std::clamp(ttl, policy.min_ttl, std::max(policy.min_ttl, policy.max_ttl));
        if (negative) ttl = std::min(ttl, std::max(policy.min_ttl, policy.negative_max_ttl));
        const size_t offset = rec.ttl_offset - scan.records_offset;
        dns::write_u32(&a.records[offset], ttl);
        a.ttl_offsets.push_back(static_cast<uint16_t>(offset));
        lifetime = std::min(lifetime, ttl);
    }

    unify_rrset_ttls(msg, scan, a);
    a.ede.clear();
    a.aa = false;
    if (scan.has_opt) {
        const dns::Bytes options = msg.subspan(scan.opt_rdata_offset, scan.opt_rdlength);
        if (!dns::copy_ede_options(options, a.ede) || a.ede.size() > kMaxEdeBytes) a.ede.clear();
    }

    if (!cacheable) {
        a.ttl = 0;
    } else if (a.kind == AnswerKind::ServFail) {
        a.ttl = policy.servfail_ttl;
    } else {
        a.ttl = scan.records.empty() ? 0 : lifetime;
    }
    return true;
}

std::optional<PreparedAnswer> prepare_answer(dns::Bytes msg, const dns::ScannedResponse& scan,
                                             const TtlPolicy& policy) {
    PreparedAnswer a;
    if (!prepare_answer_into(msg, scan, policy, a)) return std::nullopt;
    return a;
}

}  // namespace nscache::cache
