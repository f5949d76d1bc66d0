// SPDX-License-Identifier: BSD-3-Clause
#include "server/client_counts.h"

#include <netinet/in.h>

#include <cstring>

#include "common/hash.h"
#include "common/random.h"

namespace nscache::server {

size_t ClientCounts::KeyHash::operator()(const Key& k) const {
    return seeded_hash(seed, k.data(), k.size());
}

ClientCounts::ClientCounts() : hash_{secure_random_u64()}, shards_(size_t{16}, hash_) {}

// An IPv4-mapped IPv6 peer counts as the IPv4 address it carries.
ClientCounts::Key ClientCounts::key_of(const sockaddr* client) {
    Key key{};
    if (client->sa_family == AF_INET) {
        key[0] = 4;
        std::memcpy(key.data() + 1, &reinterpret_cast<const sockaddr_in*>(client)->sin_addr, 4);
        return key;
    }
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(client)->sin6_addr;
    if (IN6_IS_ADDR_V4MAPPED(&a)) {
        key[0] = 4;
        std::memcpy(key.data() + 1, a.s6_addr + 12, 4);
        return key;
    }
    key[0] = 6;
    std::memcpy(key.data() + 1, a.s6_addr, 16);
    return key;
}

bool ClientCounts::acquire(const sockaddr* client, uint32_t limit) {
    const Key key = key_of(client);
    return shards_.with(shard_of(key), [&](Counts& counts) {
        uint32_t& n = counts[key];
        if (n >= limit) {
            if (n == 0) counts.erase(key);
            return false;
        }
        ++n;
        return true;
    });
}

void ClientCounts::release(const sockaddr* client) {
    const Key key = key_of(client);
    shards_.with(shard_of(key), [&](Counts& counts) {
        auto it = counts.find(key);
        if (it == counts.end()) return;
        if (--it->second == 0) counts.erase(it);
    });
}

uint32_t ClientCounts::count(const sockaddr* client) {
    const Key key = key_of(client);
    return shards_.with(shard_of(key), [&](const Counts& counts) -> uint32_t {
        auto it = counts.find(key);
        return it == counts.end() ? 0 : it->second;
    });
}

}  // namespace nscache::server
