// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/nss_answer.h"

namespace nscache::nssd {
namespace {

void put_u16(std::vector<uint8_t>& out, size_t v) {
    const auto x = static_cast<uint16_t>(v);
    out.insert(out.end(), reinterpret_cast<const uint8_t*>(&x),
               reinterpret_cast<const uint8_t*>(&x) + 2);
}

void put_string(std::vector<uint8_t>& out, const std::string& s) {
    put_u16(out, s.size());
    out.insert(out.end(), s.begin(), s.end());
}

}  // namespace

uint16_t nss_status(const hostdb::HostAnswer& answer) {
    switch (answer.status) {
        case hostdb::HostStatus::Found:
            return NSCACHE_NSS_FOUND;
        case hostdb::HostStatus::NotFound:
            return NSCACHE_NSS_NOTFOUND;
        case hostdb::HostStatus::NoData:
            return NSCACHE_NSS_NODATA;
        case hostdb::HostStatus::TryAgain:
            break;
    }
    return NSCACHE_NSS_TRYAGAIN;
}

std::vector<uint8_t> encode_payload(const hostdb::HostAnswer& r) {
    std::vector<uint8_t> out;
    put_string(out, r.canonical);
    put_u16(out, r.aliases.size());
    for (const auto& alias : r.aliases) put_string(out, alias);
    put_u16(out, r.ipv4.size());
    for (const auto& a : r.ipv4) out.insert(out.end(), a.begin(), a.end());
    put_u16(out, r.ipv6.size());
    for (const auto& a : r.ipv6) out.insert(out.end(), a.begin(), a.end());
    return out;
}

}  // namespace nscache::nssd
