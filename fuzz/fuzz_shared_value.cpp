// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: a value read from the shared tier (Redis), which anyone with access to
// Redis may have written. Whatever the bytes, decode_value either refuses them or gives an
// answer that is well-formed, within the TTL policy, and survives being written again.
#include <cstddef>
#include <cstdint>
#include <span>

#include "cache/render.h"
#include "dns/name.h"
#include "dns/response.h"
#include "fuzz_support.h"
#include "sharedcache/shared_value.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    using namespace nscache;
    static const dns::NameBuffer name = *dns::name_from_text("www.example.test");
    const cache::CacheKey key{name.view(), dns::rtype::A, dns::kClassIN, 0};
    const cache::TtlPolicy policy{.max_ttl = 3600};
    const auto decoded = sharedcache::decode_value(std::span<const uint8_t>(data, size), key,
                                                   policy, fuzz::kWallNow, size % 2 == 1);
    if (decoded.verdict != sharedcache::ValueVerdict::Answer) {
        fuzz::check(!decoded.answer);
        return 0;
    }
    const cache::PreparedAnswer& a = *decoded.answer;
    fuzz::check(a.ttl > 0 && a.ttl <= policy.max_ttl);
    fuzz::check(a.kind != cache::AnswerKind::ServFail);
    for (const uint16_t offset : a.ttl_offsets) {
        fuzz::check(offset + 4u <= a.records.size());
        fuzz::check(dns::read_u32(&a.records[offset]) <= policy.max_ttl);
    }
    // Written back as this host would, it reads back as an answer again.
    const auto again = sharedcache::encode_value(key, a, fuzz::kWallNow);
    if (!again.empty()) {
        const auto second = sharedcache::decode_value(again, key, policy, fuzz::kWallNow, false);
        fuzz::check(second.verdict == sharedcache::ValueVerdict::Answer);
        fuzz::check(second.answer->records == a.records);
    }
    return 0;
}
