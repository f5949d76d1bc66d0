// SPDX-License-Identifier: BSD-3-Clause
// ForwardingSettings: the part of a reload snapshot that every thread which forwards needs
// (the routing and the ResolverOptions), and nothing of the DNS server's. The host fronts
// (NSS, nscd) take this; the DNS workers take server::Settings, which extends it. Immutable
// once built; shared between threads by shared_ptr to const, swapped on each thread's own
// loop (posted through a Mailbox), never changed in place.
#pragma once

#include <cstdint>
#include <memory>

#include "upstream/resolver_options.h"
#include "upstream/routing.h"

namespace nscache::upstream {

// How answers from the cache are used beyond their TTL (RFC 8767 serve-stale) and refreshed
// before it ends (prefetch): the same for DNS clients and for glibc's host lookups.
struct CachePolicy {
    bool prefetch = true;
    bool serve_expired = false;
    uint32_t stale_answer_timeout_ms = 1800;
};

struct ForwardingSettings {
    std::shared_ptr<const Routing> routing;
    ResolverOptions resolver;
    CachePolicy cache_policy;
};

using ForwardingSettingsPtr = std::shared_ptr<const ForwardingSettings>;

}  // namespace nscache::upstream
