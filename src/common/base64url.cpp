// SPDX-License-Identifier: BSD-3-Clause
#include "common/base64url.h"

#include <array>

namespace nscache {
namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr uint8_t kInvalid = 0xFF;

constexpr std::array<uint8_t, 256> make_table() {
    std::array<uint8_t, 256> table{};
    for (auto& v : table) v = kInvalid;
    for (uint8_t i = 0; i < 64; ++i) table[static_cast<uint8_t>(kAlphabet[i])] = i;
    return table;
}
constexpr std::array<uint8_t, 256> kTable = make_table();

}  // namespace

std::optional<std::vector<uint8_t>> decode_base64url(std::string_view text) {
    while (!text.empty() && text.back() == '=') text.remove_suffix(1);
    if (text.size() % 4 == 1) return std::nullopt;
    std::vector<uint8_t> out;
    out.reserve(text.size() * 3 / 4);
    uint32_t bits = 0;
    int bit_count = 0;
    for (char c : text) {
        const uint8_t v = kTable[static_cast<uint8_t>(c)];
        if (v == kInvalid) return std::nullopt;
        bits = (bits << 6) | v;
        bit_count += 6;
        if (bit_count >= 8) {
            bit_count -= 8;
            out.push_back(static_cast<uint8_t>(bits >> bit_count));
            bits &= (1u << bit_count) - 1;
        }
    }
    if (bits != 0) return std::nullopt;  // the leftover bits of a canonical encoding are zero
    return out;
}

std::string encode_base64url(const uint8_t* bytes, size_t size) {
    std::string out;
    out.reserve((size * 4 + 2) / 3);
    uint32_t bits = 0;
    int bit_count = 0;
    for (size_t i = 0; i < size; ++i) {
        bits = (bits << 8) | bytes[i];
        bit_count += 8;
        while (bit_count >= 6) {
            bit_count -= 6;
            out.push_back(kAlphabet[(bits >> bit_count) & 0x3F]);
        }
        bits &= (1u << bit_count) - 1;
    }
    if (bit_count > 0) out.push_back(kAlphabet[(bits << (6 - bit_count)) & 0x3F]);
    return out;
}

}  // namespace nscache
