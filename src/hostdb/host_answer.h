// SPDX-License-Identifier: BSD-3-Clause
// What a host lookup answers, in the form both fronts publish from (the NSS module's payload
// and nscd's records): the status, the TTL, the canonical name, aliases and addresses. Built
// from a DNS answer (following the CNAME chain from the name asked), from /etc/hosts or from a
// numeric name. Pure functions, any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "cache/answer.h"
#include "cache/cache.h"
#include "dns/wire.h"

namespace nscache::hostdb {

enum class HostStatus : uint8_t {
    Found,
    NotFound,  // NXDOMAIN: the name does not exist (HOST_NOT_FOUND)
    NoData,    // the name exists without an address of the family asked (NO_DATA)
    TryAgain,  // no authoritative answer (SERVFAIL, timeout, refused): never "not found"
};

struct HostAnswer {
    HostStatus status = HostStatus::TryAgain;
    uint32_t ttl = 0;                  // seconds it stays valid; 0: answer it, keep it nowhere
    std::string canonical;             // text, no trailing dot
    std::vector<std::string> aliases;  // by name: CNAME owners before the canonical name, or
                                       // /etc/hosts aliases; by address: the other names
    std::vector<std::array<uint8_t, 4>> ipv4;
    std::vector<std::array<uint8_t, 16>> ipv6;
    bool from_hosts_file = false;
    // By name: the name that answered (after the search list), as DNS asked it, no dot.
    std::string answered_name;

    bool found() const { return status == HostStatus::Found; }
};

// Reads a complete DNS answer to (qname, qtype) as a host answer. qtype A or AAAA collects
// addresses; PTR collects names (the first becomes canonical, as glibc's dns module keeps
// only that one; the others become aliases). A failed or missing answer is TryAgain.
HostAnswer host_answer_from_dns(dns::Bytes answer, dns::Bytes qname, uint16_t qtype);

// The same reading of an answer as the cache holds it (a cached entry's records, or an
// upstream's PreparedAnswer), without a DNS message rendered for it: TTLs counted down by
// `age_s`, or every TTL cache::kStaleAnswerTtl for a `stale` entry, exactly as the answer a
// DNS client gets from the same entry would carry them (cache/render.h).
// `scratch`: the caller's buffer, reused (the records are read behind a stand-in header).
HostAnswer host_answer_from_cache(const cache::AnswerView& answer, dns::Bytes qname, uint16_t qtype,
                                  uint32_t age_s, bool stale, std::vector<uint8_t>& scratch);
// The same, read in place from an entry cache::Cache::lookup_answer copied out (Fresh or Stale)
// for the name of its key.
HostAnswer host_answer_from_cache(const cache::CachedAnswer& hit, uint16_t qtype);

// AF_UNSPEC asks A and AAAA (glibc's dns module does the same): found if either has
// addresses (the names come from the A answer when it has addresses), NotFound if either
// says NXDOMAIN, TryAgain if a part failed and nothing was found.
HostAnswer combine_answers(const HostAnswer& a, const HostAnswer& aaaa);

// "1.2.0.192.in-addr.arpa." / nibble form under ip6.arpa., in wire format. family: 2 or 10.
std::vector<uint8_t> reverse_name(int family, const uint8_t* address);

}  // namespace nscache::hostdb
