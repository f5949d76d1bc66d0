// SPDX-License-Identifier: BSD-3-Clause
#include <arpa/inet.h>

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

std::optional<std::string> normalize_domain(std::string_view text) {
    if (text == ".") return std::string(".");
    if (!text.empty() && text.back() == '.') text.remove_suffix(1);
    if (text.empty() || text.size() > 253) return std::nullopt;
    std::string out;
    size_t label = 0;
    for (char c : text) {
        if (c == '.') {
            if (label == 0) return std::nullopt;
            label = 0;
            out += '.';
            continue;
        }
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_';
        if (!ok || ++label > 63) return std::nullopt;
        out += static_cast<char>(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
    }
    if (label == 0) return std::nullopt;
    return out + ".";
}

std::optional<LocalRecord> parse_local_record(std::string_view text, std::string& error) {
    auto next_word = [&text]() {
        while (!text.empty() && (text.front() == ' ' || text.front() == '\t'))
            text.remove_prefix(1);
        size_t n = 0;
        while (n < text.size() && text[n] != ' ' && text[n] != '\t') ++n;
        std::string_view word = text.substr(0, n);
        text.remove_prefix(n);
        return word;
    };
    const std::string_view name = next_word();
    std::string type(next_word());
    for (char& c : type) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - ('a' - 'A') : c);
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
    while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
    LocalRecord r;
    auto domain = normalize_domain(name);
    if (!domain || *domain == ".") {
        error = "bad name '" + std::string(name) + "'";
        return std::nullopt;
    }
    r.name = *domain;
    in6_addr buffer;
    if (type == "A" || type == "AAAA") {
        const std::string value(text);
        if (inet_pton(type == "A" ? AF_INET : AF_INET6, value.c_str(), &buffer) != 1) {
            error = "bad " + type + " address '" + value + "'";
            return std::nullopt;
        }
        r.type = type == "A" ? 1 : 28;
        r.value = value;
    } else if (type == "CNAME" || type == "PTR") {
        auto target = normalize_domain(text);
        if (!target || *target == ".") {
            error = "bad " + type + " target '" + std::string(text) + "'";
            return std::nullopt;
        }
        r.type = type == "CNAME" ? 5 : 12;
        r.value = *target;
    } else if (type == "TXT") {
        std::string_view body = text;
        if (body.size() >= 2 && body.front() == '"' && body.back() == '"') {
            body = body.substr(1, body.size() - 2);
        }
        if (body.size() > 255) {
            error = "TXT text longer than 255 bytes";
            return std::nullopt;
        }
        r.type = 16;
        r.value = std::string(body);
    } else {
        error = "type '" + type + "' (expected A, AAAA, CNAME, PTR or TXT)";
        return std::nullopt;
    }
    return r;
}

}  // namespace nscache
