// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: a client's packet, through everything a worker does before the network,
// in the pipeline's order: the header and question, the answer to a refused or rate-limited
// sender, the rest of the message, error answers, the RFC 8482 answer to ANY, cache key,
// lookup and rendering of a hit. The work on compressed names stays linear in the input.
#include <array>
#include <cstddef>
#include <cstdint>

#include "cache/cache.h"
#include "cache/render.h"
#include "dns/any_answer.h"
#include "dns/name.h"
#include "dns/query.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    static cache::Cache& cache = fuzz::cache_with_entries();
    const dns::Bytes msg(data, size);
    std::array<uint8_t, 65535> out{};
    fuzz::start_work();

    dns::ParsedQuery parsed = dns::parse_query_question(msg);
    if (parsed.verdict == dns::QueryVerdict::Ignore) return 0;
    {
        // A refused sender never gets more bytes than it sent (no amplification).
        dns::ParsedQuery refused = parsed;
        dns::peek_query_edns(msg, refused);
        fuzz::check(dns::write_error_answer(refused, 5, 4096, out) <= size);
    }
    if (parsed.verdict == dns::QueryVerdict::Ok) dns::parse_query_records(msg, parsed);
    // Each record's owner is walked once.
    fuzz::check_work(size, 1);
    if (parsed.verdict != dns::QueryVerdict::Ok) {
        const size_t n = dns::write_error_answer(parsed, 1, 1232, out);
        fuzz::check(n <= dns::kMaxErrorAnswer);
        return 0;
    }
    const dns::Query& q = parsed.query;
    if (q.qtype == dns::rtype::ANY) {
        fuzz::check(dns::write_any_answer(q, 1232, out) <= dns::kMaxAnyAnswer);
        return 0;
    }
    dns::NameBuffer lower;
    dns::lower_name(q.qname, lower);
    const cache::CacheKey key{lower.view(), q.qtype, q.qclass, 0};
    const cache::RenderLimits limits{cache::udp_answer_limit(q, 1232), 1232};
    const auto r = cache.lookup(key, q, fuzz::kNow, limits, out, true);
    fuzz::check(r.length <= limits.max_size);
    if (r.length > 0)
        fuzz::check(dns::parse_query(dns::Bytes(out.data(), r.length)).verdict ==
                    dns::QueryVerdict::Ignore);  // a response, QR set
    return 0;
}
