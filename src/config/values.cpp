#include <charconv>
#include <string_view>

#include "config/config.h"

namespace nscache {
namespace {

std::optional<uint64_t> leading_number(std::string_view text, std::string_view& unit) {
    uint64_t value = 0;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (ec != std::errc() || end == text.data()) return std::nullopt;
    unit = text.substr(static_cast<size_t>(end - text.data()));
    return value;
}

std::optional<uint64_t> checked_multiply(uint64_t value, uint64_t factor) {
    if (factor != 0 && value > UINT64_MAX / factor) return std::nullopt;
    return value * factor;
}

}  // namespace

std::optional<size_t> parse_size(std::string_view text) {
    std::string_view unit;
    auto value = leading_number(text, unit);
    if (!value) return std::nullopt;
    if (unit.empty() || unit == "B") return *value;
    if (unit == "K" || unit == "k" || unit == "KiB") return checked_multiply(*value, 1ull << 10);
    if (unit == "M" || unit == "m" || unit == "MiB") return checked_multiply(*value, 1ull << 20);
    if (unit == "G" || unit == "g" || unit == "GiB") return checked_multiply(*value, 1ull << 30);
    return std::nullopt;
}

std::optional<uint64_t> parse_duration_ms(std::string_view text) {
    std::string_view unit;
    auto value = leading_number(text, unit);
    if (!value) return std::nullopt;
    if (unit == "ms") return *value;
    if (unit.empty() || unit == "s") return checked_multiply(*value, 1000);
    if (unit == "m") return checked_multiply(*value, 60'000);
    if (unit == "h") return checked_multiply(*value, 3'600'000);
    if (unit == "d") return checked_multiply(*value, 86'400'000);
    return std::nullopt;
}

}  // namespace nscache

namespace nscache {

std::optional<RedisEndpoint> parse_redis_endpoint(std::string_view text) {
    RedisEndpoint endpoint;
    if (!text.empty() && text[0] == '/') {
        // sockaddr_un holds 108 bytes with the terminating NUL.
        if (text.size() > 107) return std::nullopt;
        endpoint.unix_path = std::string(text);
        return endpoint;
    }
    auto address = parse_socket_address(text, 6379);
    if (!address) return std::nullopt;
    endpoint.address = *address;
    return endpoint;
}

}  // namespace nscache
