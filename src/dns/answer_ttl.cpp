// SPDX-License-Identifier: BSD-3-Clause
#include "dns/answer_ttl.h"

#include <algorithm>

#include "dns/response.h"

namespace nscache::dns {

uint32_t answer_min_ttl(Bytes answer) {
    if (answer.size() < kHeaderSize) return 0;
    const uint16_t rcode = read_header(answer).rcode();
    if (rcode != static_cast<uint8_t>(Rcode::NoError) &&
        rcode != static_cast<uint8_t>(Rcode::NxDomain)) {
        return 0;
    }
    ScannedResponse scanned;
    if (!scan_response(answer, scanned) || scanned.extended_rcode > 3) return 0;
    if (scanned.records.empty()) return 0;
    uint32_t smallest = UINT32_MAX;
    for (const ScannedRecord& rr : scanned.records) {
        uint32_t ttl = rr.ttl;
        if (rr.type == rtype::SOA) ttl = std::min(ttl, rr.soa_minimum);
        smallest = std::min(smallest, ttl);
    }
    return smallest;
}

}  // namespace nscache::dns
