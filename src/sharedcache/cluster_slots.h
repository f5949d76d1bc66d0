// SPDX-License-Identifier: BSD-3-Clause
// Redis Cluster's routing rules, as pure functions: which of the 16384 hash slots a key lives
// in, the MOVED and ASK redirections a node answers with, and the slot map of CLUSTER SLOTS.
// Any thread.
#pragma once

#include <hiredis/hiredis.h>

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "config/address.h"

namespace nscache::sharedcache {

inline constexpr uint16_t kClusterSlots = 16384;

// CRC16 (XMODEM) of the key, or of its hash tag (the first "{...}" with something inside),
// modulo 16384: the Redis Cluster specification's key to slot mapping.
uint16_t key_slot(std::string_view key);

struct Redirect {
    bool ask = false;  // ASK: this once, at that node; MOVED: the slot lives there now
    uint16_t slot = 0;
    SocketAddress node;
};

// "MOVED 3999 127.0.0.1:6381" or "ASK 3999 [::1]:6381"; nullopt for any other error, and for a
// node given by host name (never resolved: see config's RedisEndpoint).
std::optional<Redirect> parse_redirect(std::string_view error);

struct SlotRange {
    uint16_t first = 0;
    uint16_t last = 0;
    SocketAddress master;
};

// The ranges of a CLUSTER SLOTS reply whose master has an IP address; nullopt when the reply
// is not shaped like one.
std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply);

}  // namespace nscache::sharedcache
