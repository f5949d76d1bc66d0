// SPDX-License-Identifier: BSD-3-Clause
// Where a question goes: split DNS ([[forward]] rules, longest domain suffix wins, "." the
// default), the zones nscache answers itself instead of leaking them upstream (RFC 6761
// localhost/local/invalid, RFC 7686 onion, RFC 8375 home.arpa, the RFC 6303/7793 private
// reverse zones), and local names (`local-records`, the hosts file) answered exactly.
//
// Immutable once built: a reload or a changed resolv.conf builds a new Routing and each
// worker swaps its pointer on its own thread. Upstream servers that stay across a rebuild
// are the same objects (UpstreamRegistry), so their health and RTT carry over.
// route() is called on cache misses only: one hash lookup per label of the name.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "config/config.h"
#include "dns/wire.h"
#include "upstream/upstream_set.h"

namespace nscache::upstream {

struct ForwardRule {
    std::string name;  // its first domain ("." for the default set), for stats and logs
    std::vector<std::string> domains;
    std::shared_ptr<UpstreamSet> upstreams;
    bool cache = true;
    // Its part of a shared-tier key (sharedcache::shared_key): empty for the default rule;
    // otherwise its first domain and a digest of all its domains and servers, so that only
    // hosts sending the same domains to the same servers share its answers.
    std::string shared_view;
    // Its own caps on cached TTLs (config's ForwardZone), over the global TtlPolicy.
    uint32_t max_ttl = kNoTtlCap;
    uint32_t negative_max_ttl = kNoTtlCap;
};

// A name nscache answers from local data: its records in wire form, ready to copy.
struct LocalRecordData {
    uint16_t type = 0;
    std::vector<uint8_t> rdata;
};

enum class RouteKind : uint8_t {
    Forward,        // to rule->upstreams
    LocalName,      // `records` hold the name's local data (maybe none of the asked type)
    Localhost,      // RFC 6761 §6.3: loopback addresses, for localhost. and below
    LocalNxdomain,  // a zone answered NXDOMAIN here; `zone_labels` labels of the name form it
};

struct Route {
    RouteKind kind = RouteKind::Forward;
    const ForwardRule* rule = nullptr;                      // Forward
    const std::vector<LocalRecordData>* records = nullptr;  // LocalName
    // LocalNxdomain/Localhost: the zone apex's offset in the name; Forward: the offset of the
    // rule's domain (the root's for the default), above which other servers answer.
    size_t zone_offset = 0;
};

// Upstream servers by address, kept across rebuilds (only touched by the thread that builds).
class UpstreamRegistry {
  public:
    // The server at `address` (with its TLS name and SPKI pin, from `pins`), the one already
    // known when its address, transport and name are the same.
    std::shared_ptr<UpstreamServer> get(const UpstreamAddress& address,
                                        const std::vector<SpkiPin>& pins);

  private:
    std::vector<std::weak_ptr<UpstreamServer>> known_;
};

// What the hosts file contributes: (name, type A/AAAA, address text) for each address it
// lists, for the canonical name and every alias.
struct HostsEntry {
    std::string name;  // lower-case text with a trailing dot
    uint16_t type = 0;
    std::string address;
    bool operator==(const HostsEntry&) const = default;
};

class Routing {
  public:
    // The rules `config` describes: its [[forward]] tables, the default set (`upstream`, the
    // resolv.conf servers, or a "." table), the built-in local zones (unless
    // forward_private_zones; localhost always), and the local records plus `hosts` entries
    // (each A/AAAA also answers its PTR).
    static std::shared_ptr<const Routing> build(const Config& config, UpstreamRegistry& known,
                                                const std::vector<HostsEntry>& hosts = {});

    // `lower_name`: an uncompressed lower-case wire name.
    Route route(dns::Bytes lower_name) const;

    // The local data of exactly this name, if any (for chasing a local CNAME).
    const std::vector<LocalRecordData>* local(dns::Bytes lower_name) const;

    const std::vector<ForwardRule>& rules() const { return rules_; }  // [0] is the default
    // Every distinct server of every rule, for health probes and stats.
    std::vector<std::shared_ptr<UpstreamServer>> servers() const;
    // Every local name (wire, lower-case), so a change can flush them from the cache.
    std::vector<std::string> local_names() const;
    // The zones answered here (localhost and the NXDOMAIN zones), as wire suffixes.
    std::vector<std::string> local_zones() const;
    // The [[forward]] rules' domains but the root, as wire suffixes.
    std::vector<std::string> forward_domains() const;
    // The domains (wire, lower-case) whose route differs between `before` and this routing:
    // a [[forward]] added, removed or pointed at other servers, a local zone kept or given
    // up. Answers cached under them came from elsewhere: a change flushes them.
    std::vector<std::string> moved_domains(const Routing& before) const;
    size_t upstream_count() const;

  private:
    struct TransparentHash {
        using is_transparent = void;
        size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
    };
    struct Zone {
        RouteKind kind = RouteKind::Forward;
        size_t rule = 0;
    };
    // Where a zone leads, comparable across two routings.
    std::string destination(const Zone& zone) const;

    std::vector<ForwardRule> rules_;
    std::unordered_map<std::string, Zone, TransparentHash, std::equal_to<>> zones_;
    std::unordered_map<std::string, std::vector<LocalRecordData>, TransparentHash, std::equal_to<>>
        names_;
};

}  // namespace nscache::upstream
