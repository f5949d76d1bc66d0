// SPDX-License-Identifier: BSD-3-Clause
// What the forwarder asks upstream, in the form every layer needs it: the cache key, the
// coalescing key and the wire question. Owns its lower-cased name.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "cache/cache.h"
#include "dns/name.h"
#include "dns/response.h"

namespace nscache::upstream {

struct Question {
    dns::NameBuffer name;  // lower-cased wire name
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    bool do_bit = false;
    bool cd = false;

    uint8_t key_flags() const {
        return static_cast<uint8_t>((do_bit ? cache::kKeyDo : 0) | (cd ? cache::kKeyCd : 0));
    }
    cache::CacheKey cache_key() const {
        return cache::CacheKey{name.view(), qtype, qclass, key_flags()};
    }
    dns::UpstreamQuestion wire() const {
        return dns::UpstreamQuestion{name.view(), qtype, qclass, do_bit, cd};
    }
    // The coalescing key: the same fields as the cache key, as one string.
    std::string key() const {
        std::string k(name.length + 5u, '\0');
        std::memcpy(k.data(), name.bytes, name.length);
        char* tail = k.data() + name.length;
        tail[0] = static_cast<char>(qtype >> 8);
        tail[1] = static_cast<char>(qtype);
        tail[2] = static_cast<char>(qclass >> 8);
        tail[3] = static_cast<char>(qclass);
        tail[4] = static_cast<char>(key_flags());
        return k;
    }
};

}  // namespace nscache::upstream
