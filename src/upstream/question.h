// SPDX-License-Identifier: BSD-3-Clause
// The one question of the miss path, built once per client query (QueryPipeline, HostLookup)
// and read by every layer after it: the cache (lookup and insert), coalescing
// (InflightTable), the failure cache, routing and the upstream query. Owns its lower-cased
// name. A value of one thread: copies go to other threads, the memos below never do.
//
// Guarantees
// - The name is hashed once, with the cache's seed (Cache::hash_name): that hash picks the
//   cache's shard and bucket, and key_hash() (the coalescing and failure-cache key) is mixed
//   from it and the other key fields without reading the name again.
// - The route is computed once per Routing (route_by()); the memo is kept only while the
//   caller holds that Routing, and copies meant to outlive the query drop it (forget_route()).
#pragma once

#include <cstdint>
#include <cstring>
#include <type_traits>

#include "cache/cache.h"
#include "common/hash.h"
#include "dns/name.h"
#include "dns/response.h"
#include "upstream/routing.h"

namespace nscache::upstream {

struct Question {
    dns::NameBuffer name;  // lower-cased wire name
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    bool do_bit = false;
    bool cd = false;
    // Cache::hash_name(name); 0: not computed yet (the Resolver computes it on entry).
    uint64_t name_hash = 0;

    void hash_with(const cache::Cache& cache) { name_hash = cache.hash_name(name.view()); }

    uint8_t key_flags() const {
        return static_cast<uint8_t>((do_bit ? cache::kKeyDo : 0) | (cd ? cache::kKeyCd : 0));
    }
    cache::CacheKey cache_key() const {
        return cache::CacheKey{name.view(), qtype, qclass, key_flags(), name_hash};
    }
    dns::UpstreamQuestion wire() const {
        return dns::UpstreamQuestion{name.view(), qtype, qclass, do_bit, cd};
    }
    // The coalescing and failure-cache key: the cache key's fields, from the name's hash.
    // Valid once name_hash is set.
    uint64_t key_hash() const {
        const uint64_t fields = uint64_t{qtype} << 24 | uint64_t{qclass} << 8 | key_flags();
        return mix128(name_hash ^ fields, 0x9E3779B97F4A7C15ull);
    }
    // The same cache key (what coalescing compares).
    bool same_key(const Question& o) const {
        return qtype == o.qtype && qclass == o.qclass && key_flags() == o.key_flags() &&
               name.length == o.name.length &&
               std::memcmp(name.bytes, o.name.bytes, name.length) == 0;
    }

    // The route of the name under `routing`: computed on the first call for that Routing.
    const Route& route_by(const Routing& routing) const {
        if (routed_by_ != &routing) {
            memo_.route = routing.route(name.view());
            routed_by_ = &routing;
        }
        return memo_.route;
    }
    // For a copy that outlives the Routing it was routed by (a waiting client's).
    void forget_route() { routed_by_ = nullptr; }

  private:
    // Left unwritten until routed (routed_by_ says when it holds a route): a cache hit, which
    // never routes, pays nothing for it.
    union RouteMemo {
        RouteMemo() {}
        Route route;
    };
    static_assert(std::is_trivially_copyable_v<Route>);

    mutable const Routing* routed_by_ = nullptr;
    mutable RouteMemo memo_;
};

}  // namespace nscache::upstream
