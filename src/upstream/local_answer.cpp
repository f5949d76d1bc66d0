// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/local_answer.h"

#include <algorithm>

#include "dns/name.h"

namespace nscache::upstream {
namespace {

constexpr int kMaxLocalChain = 8;

// Appends records to a PreparedAnswer, keeping the offset of every TTL.
class RecordWriter {
  public:
    explicit RecordWriter(cache::PreparedAnswer& a) : a_(a) {}

    void pointer(uint16_t target) { u16(static_cast<uint16_t>(0xC000 | target)); }
    void name(dns::Bytes wire) { a_.records.insert(a_.records.end(), wire.begin(), wire.end()); }
    void fixed(uint16_t type, uint16_t rclass, uint32_t ttl, size_t rdlength) {
        u16(type);
        u16(rclass);
        a_.ttl_offsets.push_back(static_cast<uint16_t>(a_.records.size()));
        u16(static_cast<uint16_t>(ttl >> 16));
        u16(static_cast<uint16_t>(ttl));
        u16(static_cast<uint16_t>(rdlength));
    }
    void bytes(const uint8_t* p, size_t n) { a_.records.insert(a_.records.end(), p, p + n); }
    void u16(uint16_t v) {
        a_.records.push_back(static_cast<uint8_t>(v >> 8));
        a_.records.push_back(static_cast<uint8_t>(v));
    }
    void u32(uint32_t v) {
        u16(static_cast<uint16_t>(v >> 16));
        u16(static_cast<uint16_t>(v));
    }

  private:
    cache::PreparedAnswer& a_;
};

cache::PreparedAnswer empty(uint8_t rcode, cache::AnswerKind kind) {
    cache::PreparedAnswer a;
    a.kind = kind;
    a.rcode = rcode;
    a.ttl = 0;    // never cached
    a.aa = true;  // nscache is the authority for what it answers itself
    return a;
}

// The SOA of a zone answered here (owner: `owner_offset` into the question's name), for the
// authority section of a negative answer, so a client may cache it for `ttl` (RFC 2308 §5),
// or as the answer to the apex's SOA query.
void write_soa(RecordWriter& w, size_t owner_offset, uint32_t ttl) {
    w.pointer(static_cast<uint16_t>(dns::kHeaderSize + owner_offset));
    static const uint8_t kMname[] = {9, 'l', 'o', 'c', 'a', 'l', 'h', 'o', 's', 't', 0};
    static const uint8_t kRname[] = {6,   'n', 'o', 'b', 'o', 'd', 'y', 7,
                                     'i', 'n', 'v', 'a', 'l', 'i', 'd', 0};
    w.fixed(dns::rtype::SOA, dns::kClassIN, ttl, sizeof kMname + sizeof kRname + 20);
    w.bytes(kMname, sizeof kMname);
    w.bytes(kRname, sizeof kRname);
    for (uint32_t v : {uint32_t{1}, uint32_t{3600}, uint32_t{1200}, uint32_t{604800}, ttl}) {
        w.u32(v);
    }
}

// NODATA: the name exists without the type asked; the SOA lets the client cache that.
void make_nodata(cache::PreparedAnswer& a, size_t zone_offset, uint32_t ttl) {
    a.kind = cache::AnswerKind::Negative;
    RecordWriter w(a);
    write_soa(w, zone_offset, ttl);
    a.nscount = 1;
}

// A name in a zone kept local (RFC 6303): NXDOMAIN below the apex; at the apex the empty
// zone exists (its SOA for an SOA query, NODATA otherwise).
cache::PreparedAnswer nxdomain(const Question& q, size_t zone_offset, uint32_t ttl) {
    if (zone_offset == 0) {
        cache::PreparedAnswer a =
            empty(static_cast<uint8_t>(dns::Rcode::NoError), cache::AnswerKind::Positive);
        if (q.qtype == dns::rtype::SOA) {
            RecordWriter w(a);
            write_soa(w, 0, ttl);
            a.ancount = 1;
        } else {
            make_nodata(a, 0, ttl);
        }
        return a;
    }
    cache::PreparedAnswer a =
        empty(static_cast<uint8_t>(dns::Rcode::NxDomain), cache::AnswerKind::Negative);
    RecordWriter w(a);
    write_soa(w, zone_offset, ttl);
    a.nscount = 1;
    return a;
}

cache::PreparedAnswer localhost(const Question& q, size_t zone_offset, uint32_t ttl) {
    cache::PreparedAnswer a =
        empty(static_cast<uint8_t>(dns::Rcode::NoError), cache::AnswerKind::Positive);
    RecordWriter w(a);
    static const uint8_t kV4[4] = {127, 0, 0, 1};
    static const uint8_t kV6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (q.qtype == dns::rtype::A || q.qtype == dns::rtype::AAAA) {
        const bool v4 = q.qtype == dns::rtype::A;
        w.pointer(dns::kHeaderSize);
        w.fixed(q.qtype, dns::kClassIN, ttl, v4 ? 4 : 16);
        w.bytes(v4 ? kV4 : kV6, v4 ? 4 : 16);
        a.ancount = 1;
    } else {
        make_nodata(a, zone_offset, ttl);  // the name exists, without this type
    }
    return a;
}

cache::PreparedAnswer local_name(const Routing& routing, const std::vector<LocalRecordData>& data,
                                 const Question& q, uint32_t ttl) {
    cache::PreparedAnswer a =
        empty(static_cast<uint8_t>(dns::Rcode::NoError), cache::AnswerKind::Positive);
    RecordWriter w(a);
    const std::vector<LocalRecordData>* records = &data;
    std::vector<uint8_t> owner;  // empty: the question's name (a pointer to it)
    for (int hop = 0; hop < kMaxLocalChain && records != nullptr; ++hop) {
        auto write_owner = [&] {
            if (owner.empty()) {
                w.pointer(dns::kHeaderSize);
            } else {
                w.name(dns::Bytes(owner));
            }
        };
        bool found = false;
        for (const LocalRecordData& r : *records) {
            if (r.type != q.qtype) continue;
            write_owner();
            w.fixed(r.type, dns::kClassIN, ttl, r.rdata.size());
            w.bytes(r.rdata.data(), r.rdata.size());
            ++a.ancount;
            found = true;
        }
        if (found || q.qtype == dns::rtype::CNAME) break;
        auto cname = std::find_if(records->begin(), records->end(),
                                  [](const auto& r) { return r.type == dns::rtype::CNAME; });
        if (cname == records->end()) break;
        write_owner();
        w.fixed(dns::rtype::CNAME, dns::kClassIN, ttl, cname->rdata.size());
        w.bytes(cname->rdata.data(), cname->rdata.size());
        ++a.ancount;
        owner = cname->rdata;
        records = routing.local(dns::Bytes(owner));  // a target outside local data: stop here
    }
    if (a.ancount == 0) make_nodata(a, 0, ttl);  // NODATA: the name exists
    return a;
}

bool is(const Question& q, const char* text) {
    auto name = dns::name_from_text(text);
    return dns::names_equal_ci(q.name.view(), name->view());
}

}  // namespace

cache::PreparedAnswer local_answer(const Routing& routing, const Route& route,
                                   const Question& question, uint32_t ttl) {
    switch (route.kind) {
        case RouteKind::LocalName:
            return local_name(routing, *route.records, question, ttl);
        case RouteKind::Localhost:
            return localhost(question, route.zone_offset, ttl);
        case RouteKind::LocalNxdomain:
        case RouteKind::Forward:
            break;
    }
    return nxdomain(question, route.zone_offset, ttl);
}

cache::PreparedAnswer chaos_answer(const Question& q, const std::string& version,
                                   const std::string& id) {
    const std::string* text = nullptr;
    if (q.qtype == dns::rtype::TXT || q.qtype == dns::rtype::ANY) {
        if (is(q, "version.bind.") || is(q, "version.server.")) text = &version;
        if (is(q, "id.server.") || is(q, "hostname.bind.")) text = &id;
    }
    if (text == nullptr || text->empty()) {
        cache::PreparedAnswer refused =
            empty(static_cast<uint8_t>(dns::Rcode::Refused), cache::AnswerKind::Positive);
        refused.aa = false;  // AA speaks for an answer (RFC 1035 §4.1.1); a refusal gives none
        return refused;
    }
    cache::PreparedAnswer a =
        empty(static_cast<uint8_t>(dns::Rcode::NoError), cache::AnswerKind::Positive);
    RecordWriter w(a);
    const size_t length = std::min<size_t>(text->size(), 255);
    w.pointer(dns::kHeaderSize);
    w.fixed(dns::rtype::TXT, kClassChaos, 0, length + 1);
    const uint8_t n = static_cast<uint8_t>(length);
    w.bytes(&n, 1);
    w.bytes(reinterpret_cast<const uint8_t*>(text->data()), length);
    a.ancount = 1;
    return a;
}

}  // namespace nscache::upstream
