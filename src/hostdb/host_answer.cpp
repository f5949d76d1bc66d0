// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/host_answer.h"

#include <algorithm>
#include <array>
#include <cstring>

#include "cache/render.h"
#include "dns/name.h"
#include "dns/record.h"

namespace nscache::hostdb {
namespace {

constexpr int kMaxChain = 16;

std::string text_without_dot(dns::Bytes wire_name) {
    std::string t = dns::name_to_text(wire_name);
    if (t.size() > 1 && t.back() == '.') t.pop_back();
    return t;
}

// What the cache does to a stored TTL when it serves it (cache/render.h): counted down by the
// entry's age, or the short stale TTL (RFC 8767 §4). A DNS message's TTLs are read as sent.
struct TtlClock {
    uint32_t age_s = 0;
    bool stale = false;
    uint32_t operator()(uint32_t stored) const {
        if (stale) return cache::kStaleAnswerTtl;
        return stored > age_s ? stored - age_s : 0;
    }
};

// The records of an answer to (qname, qtype): `counts` answer and authority records from
// `offset` in `msg`, whose compression pointers may point anywhere before them.
HostAnswer read_records(dns::Bytes msg, size_t offset, uint8_t rcode, uint16_t ancount,
                        uint16_t nscount, dns::Bytes qname, uint16_t qtype, TtlClock clock) {
    HostAnswer r;
    if (rcode != static_cast<uint8_t>(dns::Rcode::NoError) &&
        rcode != static_cast<uint8_t>(dns::Rcode::NxDomain)) {
        return r;  // TryAgain
    }
    struct Rr {
        dns::NameBuffer owner;
        dns::RecordView view;
    };
    std::vector<Rr> answers;
    uint32_t negative_ttl = 0;
    bool have_soa = false;
    const size_t counts = size_t{ancount} + nscount;
    for (size_t i = 0; i < counts; ++i) {
        auto rr = dns::read_record(msg, offset);
        if (!rr) return r;
        offset = rr->end;
        if (i < ancount) {
            Rr item;
            if (!dns::read_name_lower(msg, rr->owner_offset, item.owner)) return r;
            item.view = *rr;
            item.view.ttl = clock(rr->ttl);
            answers.push_back(item);
        } else if (rr->type == dns::rtype::SOA && !have_soa) {
            have_soa = true;
            negative_ttl = clock(rr->ttl);  // the cache already made it min(SOA TTL, MINIMUM)
        }
    }

    dns::NameBuffer current;
    dns::lower_name(qname, current);
    uint32_t ttl = UINT32_MAX;
    std::vector<std::string> chain;  // CNAME owners, in order
    for (int hop = 0; hop < kMaxChain; ++hop) {
        bool followed = false;
        for (const Rr& rr : answers) {
            if (!dns::names_equal_ci(rr.owner.view(), current.view())) continue;
            if (rr.view.type == dns::rtype::CNAME) {
                dns::NameBuffer target;
                if (!dns::read_name_lower(msg, rr.view.rdata_offset, target)) return r;
                chain.push_back(text_without_dot(current.view()));
                ttl = std::min(ttl, rr.view.ttl);
                current = target;
                followed = true;
                break;
            }
        }
        if (!followed) break;
    }
    std::vector<std::string> ptr_names;
    for (const Rr& rr : answers) {
        if (!dns::names_equal_ci(rr.owner.view(), current.view()) || rr.view.type != qtype)
            continue;
        if (qtype == dns::rtype::A && rr.view.rdlength == 4) {
            std::array<uint8_t, 4> a;
            std::memcpy(a.data(), &msg[rr.view.rdata_offset], 4);
            r.ipv4.push_back(a);
        } else if (qtype == dns::rtype::AAAA && rr.view.rdlength == 16) {
            std::array<uint8_t, 16> a;
            std::memcpy(a.data(), &msg[rr.view.rdata_offset], 16);
            r.ipv6.push_back(a);
        } else if (qtype == dns::rtype::PTR) {
            dns::NameBuffer target;
            if (!dns::read_name(msg, rr.view.rdata_offset, target)) continue;
            ptr_names.push_back(text_without_dot(target.view()));
        } else {
            continue;
        }
        ttl = std::min(ttl, rr.view.ttl);
    }
    if (qtype == dns::rtype::PTR) {
        // The CNAME chain of a classless reverse delegation (RFC 2317) names no host.
        if (!ptr_names.empty()) {
            r.canonical = ptr_names.front();
            r.aliases.assign(ptr_names.begin() + 1, ptr_names.end());
            r.status = HostStatus::Found;
        }
    } else {
        r.canonical = text_without_dot(current.view());
        r.aliases = std::move(chain);
        if (!r.ipv4.empty() || !r.ipv6.empty()) r.status = HostStatus::Found;
    }
    if (r.status != HostStatus::Found) {
        r.status = rcode == static_cast<uint8_t>(dns::Rcode::NxDomain) ? HostStatus::NotFound
                                                                       : HostStatus::NoData;
        // Without an SOA the negative answer may not be kept (RFC 2308 §5).
        ttl = std::min(ttl, have_soa ? negative_ttl : 0u);
    }
    r.ttl = ttl == UINT32_MAX ? 0 : ttl;
    return r;
}

}  // namespace

HostAnswer host_answer_from_dns(dns::Bytes msg, dns::Bytes qname, uint16_t qtype) {
    if (msg.size() < dns::kHeaderSize) return {};
    const dns::Header h = dns::read_header(msg);
    auto question = dns::skip_name(msg, dns::kHeaderSize);
    if (h.qdcount != 1 || !question) return {};
    return read_records(msg, question->end + 4, h.rcode(), h.ancount, h.nscount, qname, qtype, {});
}

HostAnswer host_answer_from_cache(const cache::AnswerView& answer, dns::Bytes qname, uint16_t qtype,
                                  uint32_t age_s, bool stale, std::vector<uint8_t>& scratch) {
    // The records' compression pointers count from the start of the message they came in
    // (the question's name at offset 12), so they are read behind a stand-in for the header
    // and the question: one copy of the records, no header, flags, OPT or TTLs written.
    const size_t records_offset = dns::kHeaderSize + qname.size() + 4;
    scratch.resize(records_offset + answer.records.size());
    std::memcpy(scratch.data() + dns::kHeaderSize, qname.data(), qname.size());
    // An answer with no records (NXDOMAIN, NODATA without SOA) has a null data(): memcpy's
    // arguments must not be null even for 0 bytes (UBSan).
    if (!answer.records.empty()) {
        std::memcpy(scratch.data() + records_offset, answer.records.data(), answer.records.size());
    }
    return read_records(dns::Bytes(scratch), records_offset, answer.rcode, answer.ancount,
                        answer.nscount, qname, qtype, TtlClock{age_s, stale});
}

HostAnswer host_answer_from_cache(const cache::CachedAnswer& hit, uint16_t qtype) {
    if (hit.freshness == cache::Freshness::Miss) return {};
    return read_records(dns::Bytes(hit.message), hit.records_offset, hit.rcode, hit.ancount,
                        hit.nscount, hit.qname(), qtype,
                        TtlClock{hit.age_s, hit.freshness == cache::Freshness::Stale});
}

HostAnswer combine_answers(const HostAnswer& a, const HostAnswer& aaaa) {
    HostAnswer r;
    r.ttl = std::min(a.ttl, aaaa.ttl);
    r.answered_name = a.answered_name.empty() ? aaaa.answered_name : a.answered_name;
    if (a.found() || aaaa.found()) {
        const HostAnswer& names = a.found() ? a : aaaa;
        r.status = HostStatus::Found;
        r.canonical = names.canonical;
        r.aliases = names.aliases;
        r.ipv4 = a.ipv4;
        r.ipv6 = aaaa.ipv6;
        // A failed half must not be remembered as "no address of that family".
        if (a.status == HostStatus::TryAgain || aaaa.status == HostStatus::TryAgain) r.ttl = 0;
        return r;
    }
    if (a.status == HostStatus::NotFound || aaaa.status == HostStatus::NotFound) {
        r.status = HostStatus::NotFound;
    } else if (a.status == HostStatus::NoData && aaaa.status == HostStatus::NoData) {
        r.status = HostStatus::NoData;
    } else {
        r.status = HostStatus::TryAgain;
        r.ttl = 0;
    }
    return r;
}

std::vector<uint8_t> reverse_name(int family, const uint8_t* address) {
    std::string text;
    if (family == 2) {  // AF_INET
        for (int i = 3; i >= 0; --i) text += std::to_string(address[i]) + ".";
        text += "in-addr.arpa.";
    } else {
        static const char kHex[] = "0123456789abcdef";
        for (int i = 15; i >= 0; --i) {
            text += kHex[address[i] & 0xF];
            text += '.';
            text += kHex[address[i] >> 4];
            text += '.';
        }
        text += "ip6.arpa.";
    }
    auto name = dns::name_from_text(text);
    return std::vector<uint8_t>(name->bytes, name->bytes + name->length);
}

}  // namespace nscache::hostdb
