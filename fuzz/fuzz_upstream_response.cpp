// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: an upstream's answer, through validation, preparation, insertion into the
// cache, and serving a hit from it to a client that asked the same question. The work on
// compressed names stays linear in the input.
#include <array>
#include <cstddef>
#include <cstdint>

#include "cache/answer.h"
#include "cache/cache.h"
#include "dns/name.h"
#include "dns/query.h"
#include "dns/response.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    static cache::Cache cache(cache::CacheConfig{.budget_bytes = 1 << 20, .stale_ttl_s = 60});
    const dns::Bytes msg(data, size);
    if (size < dns::kHeaderSize) return 0;
    fuzz::start_work();
    // The question we "asked": whatever the answer's question says, if it is one.
    auto qname = dns::skip_uncompressed_name(msg, dns::kHeaderSize);
    if (!qname || qname->end + 4 > size) return 0;
    dns::NameBuffer lower;
    dns::lower_name(msg.subspan(dns::kHeaderSize, qname->end - dns::kHeaderSize), lower);
    const dns::UpstreamQuestion asked{lower.view(), dns::read_u16(data + qname->end),
                                      dns::read_u16(data + qname->end + 2), false, false};
    if (!dns::answers_question(msg, dns::read_u16(data), asked)) return 0;
    dns::ScannedResponse scan;
    const bool scanned = dns::scan_response(msg, scan);
    // Owners are walked once, names in rdata once (an SOA's twice): two walks at most.
    fuzz::check_work(size, 2);
    if (!scanned) return 0;
    auto prepared = cache::prepare_answer(msg, scan, cache::TtlPolicy{.min_ttl = 0});
    if (!prepared) return 0;
    const cache::CacheKey key{lower.view(), asked.qtype, asked.qclass, 0};
    cache.insert(key, *prepared, fuzz::kNow);

    // A client asks the same question (with EDNS) and gets the stored answer back.
    std::vector<uint8_t> query(dns::kHeaderSize);
    dns::write_header(query.data(), dns::Header{0x1234, dns::flag::RD, 1, 0, 0, 1});
    query.insert(query.end(), data + dns::kHeaderSize, data + qname->end + 4);
    const uint8_t opt[11] = {0, 0, 41, 0x10, 0, 0, 0, 0, 0, 0, 0};
    query.insert(query.end(), opt, opt + sizeof opt);
    const dns::ParsedQuery parsed = dns::parse_query(dns::Bytes(query));
    if (parsed.verdict != dns::QueryVerdict::Ok) return 0;
    std::array<uint8_t, 65535> out{};
    const cache::RenderLimits limits{65535, 1232};
    const auto r = cache.lookup(key, parsed.query, fuzz::kNow + 1500, limits, out, true);
    if (r.length > 0) {
        // What we serve must itself be a well-formed message.
        dns::ScannedResponse again;
        fuzz::check(dns::scan_response(dns::Bytes(out.data(), r.length), again));
        // The served answer's records are the input's: as much work again at most.
        fuzz::check_work(size, 4);
    }
    return 0;
}
