// Turning DNS answers into what the NSS module returns: follow the CNAME chain from the name
// asked, collect the addresses (or PTR names), take the smallest TTL, and encode the payload
// of nss/protocol.h. Pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "dns/wire.h"
#include "nss/protocol.h"

namespace nscache::server {

struct HostsResult {
    uint16_t status = NSCACHE_NSS_TRYAGAIN;  // enum nscache_nss_status
    uint32_t ttl = 0;
    std::string canonical;             // text, no trailing dot
    std::vector<std::string> aliases;  // CNAME owners before the canonical name, or PTR names
    std::vector<std::array<uint8_t, 4>> ipv4;
    std::vector<std::array<uint8_t, 16>> ipv6;
};

// Reads a complete DNS answer to (qname, qtype) as a hosts result. qtype A or AAAA collects
// addresses; PTR collects names (the first becomes canonical). A failed or missing answer is
// TRYAGAIN.
HostsResult hosts_result_from_answer(dns::Bytes answer, dns::Bytes qname, uint16_t qtype);

// AF_UNSPEC asks A and AAAA: found if either has addresses, NXDOMAIN if either says so (the
// name does not exist), TRYAGAIN if a part failed and nothing was found.
HostsResult combine_results(const HostsResult& a, const HostsResult& aaaa);

std::vector<uint8_t> encode_payload(const HostsResult& r);

// "1.2.0.192.in-addr.arpa." / nibble form under ip6.arpa., in wire format.
std::vector<uint8_t> reverse_name(int family, const uint8_t* address);

}  // namespace nscache::server
