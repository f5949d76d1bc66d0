// SPDX-License-Identifier: BSD-3-Clause
#include "sharedcache/cluster_slots.h"

#include <charconv>
#include <string>

namespace nscache::sharedcache {
namespace {

uint16_t crc16_xmodem(std::string_view data) {
    uint16_t crc = 0;
    for (const char c : data) {
        crc ^= static_cast<uint16_t>(static_cast<uint8_t>(c) << 8);
        for (int i = 0; i < 8; ++i) {
            crc = (crc & 0x8000) ? static_cast<uint16_t>(crc << 1 ^ 0x1021)
                                 : static_cast<uint16_t>(crc << 1);
        }
    }
    return crc;
}

std::optional<uint64_t> parse_number(std::string_view text) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
    return value;
}

// "ip:port" as nodes write it: IPv6 without brackets, the port after the last colon.
std::optional<SocketAddress> node_address(std::string_view text) {
    const size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) return std::nullopt;
    const std::string_view host = text.substr(0, colon);
    const std::string_view port = text.substr(colon + 1);
    std::string spelled = host.find(':') != std::string_view::npos
                              ? "[" + std::string(host) + "]:" + std::string(port)
                              : std::string(text);
    return parse_socket_address(spelled, std::nullopt);
}

}  // namespace

uint16_t key_slot(std::string_view key) {
    const size_t open = key.find('{');
    if (open != std::string_view::npos) {
        const size_t close = key.find('}', open + 1);
        if (close != std::string_view::npos && close > open + 1) {
            key = key.substr(open + 1, close - open - 1);
        }
    }
    return static_cast<uint16_t>(crc16_xmodem(key) % kClusterSlots);
}

std::optional<Redirect> parse_redirect(std::string_view error) {
    Redirect r;
    if (error.starts_with("MOVED ")) {
        error.remove_prefix(6);
    } else if (error.starts_with("ASK ")) {
        r.ask = true;
        error.remove_prefix(4);
    } else {
        return std::nullopt;
    }
    const size_t space = error.find(' ');
    if (space == std::string_view::npos) return std::nullopt;
    auto slot = parse_number(error.substr(0, space));
    auto node = node_address(error.substr(space + 1));
    if (!slot || *slot >= kClusterSlots || !node) return std::nullopt;
    r.slot = static_cast<uint16_t>(*slot);
    r.node = *node;
    return r;
}

std::optional<std::vector<SlotRange>> parse_cluster_slots(const redisReply& reply) {
    if (reply.type != REDIS_REPLY_ARRAY) return std::nullopt;
    std::vector<SlotRange> ranges;
    for (size_t i = 0; i < reply.elements; ++i) {
        const redisReply* range = reply.element[i];
        if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) return std::nullopt;
        const redisReply* first = range->element[0];
        const redisReply* last = range->element[1];
        const redisReply* master = range->element[2];
        if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER ||
            first->integer < 0 || last->integer < first->integer ||
            last->integer >= kClusterSlots || master->type != REDIS_REPLY_ARRAY ||
            master->elements < 2 || master->element[0]->type != REDIS_REPLY_STRING ||
            master->element[1]->type != REDIS_REPLY_INTEGER) {
            return std::nullopt;
        }
        const std::string_view host(master->element[0]->str, master->element[0]->len);
        const long long port = master->element[1]->integer;
        if (port <= 0 || port > 65535) continue;
        auto address = node_address(std::string(host) + ":" + std::to_string(port));
        if (!address) continue;  // "?" (unknown) or a host name: those slots stay unrouted
        ranges.push_back(SlotRange{static_cast<uint16_t>(first->integer),
                                   static_cast<uint16_t>(last->integer), *address});
    }
    return ranges;
}

}  // namespace nscache::sharedcache
