// libFuzzer target: a client's packet, through everything a worker does before the network:
// parse, error answers, cache key, lookup and rendering of a hit.
#include <array>
#include <cstddef>
#include <cstdint>

#include "cache/cache.h"
#include "cache/render.h"
#include "dns/name.h"
#include "dns/query.h"
#include "fuzz_support.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    static cache::Cache& cache = fuzz::cache_with_entries();
    const dns::ParsedQuery parsed = dns::parse_query(dns::Bytes(data, size));
    std::array<uint8_t, 65535> out{};
    if (parsed.verdict != dns::QueryVerdict::Ok) {
        if (parsed.verdict != dns::QueryVerdict::Ignore) {
            const size_t n = dns::write_error_answer(parsed, 1, 1232, out);
            fuzz::check(n <= dns::kMaxErrorAnswer);
        }
        return 0;
    }
    const dns::Query& q = parsed.query;
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
