// SPDX-License-Identifier: BSD-3-Clause
#include "dns/name.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace nscache::dns {
namespace {

constexpr uint8_t kPointerMask = 0xC0;

// Shared walker: calls on_label(label_bytes, length) for each label, in order, then returns
// the extent. `allow_pointers` false rejects any compression pointer. Once a pointer has been
// followed, every byte read must lie before the name's own start (a pointer names an earlier,
// complete name) and outside the `frozen` fields.
template <typename OnLabel>
std::optional<NameExtent> walk_name(Bytes msg, size_t offset, bool allow_pointers,
                                    FrozenFields frozen, OnLabel&& on_label) {
    size_t pos = offset;
    size_t end = 0;  // set once, at the first pointer
    size_t pointer_limit = offset;
    size_t wire_length = 0;
    int hops = 0;
    // Bytes [pos, pos + n) may be read: inside the message, and once behind a pointer, before
    // the name's start and clear of every frozen field.
    auto readable = [&](size_t n) {
        if (pos + n > msg.size()) return false;
        if (end == 0) return true;
        return pos + n <= offset && !frozen.overlaps(pos, pos + n);
    };
    for (;;) {
        if (!readable(1)) return std::nullopt;
        const uint8_t len = msg[pos];
        if ((len & kPointerMask) == kPointerMask) {
            if (!allow_pointers || !readable(2)) return std::nullopt;
            const size_t target = static_cast<size_t>(len & 0x3F) << 8 | msg[pos + 1];
            if (target >= pointer_limit) return std::nullopt;  // forward or looping pointer
            // No name lives in the header. A pointer there reads ID or flag bytes, which differ
            // in every answer rendered from the cache (found by fuzz_upstream_response).
            if (target < kHeaderSize) return std::nullopt;
            if (++hops > kMaxPointerHops) return std::nullopt;
#ifdef NSCACHE_WORK_COUNTERS
            ++work_counters::pointer_hops;
#endif
            if (end == 0) end = pos + 2;
            pointer_limit = target;
            pos = target;
            continue;
        }
        if ((len & kPointerMask) != 0) return std::nullopt;  // 0x40/0x80: obsolete label types
        wire_length += 1 + len;
        if (wire_length > kMaxNameLength) return std::nullopt;
        if (len == 0) {
            if (end == 0) end = pos + 1;
            return NameExtent{end, wire_length};
        }
        if (!readable(1 + size_t{len})) return std::nullopt;
        on_label(msg.data() + pos + 1, len);
        pos += 1 + len;
    }
}

bool needs_escape(uint8_t c) {
    switch (c) {
        case '.':
        case '\\':
        case '(':
        case ')':
        case ';':
        case '"':
        case '$':
        case '@':
            return true;
        default:
            return c <= 0x20 || c >= 0x7F;
    }
}

}  // namespace

bool FrozenFields::overlaps(size_t from, size_t to) const {
    // The first field that ends after `from`; fields are ascending and do not overlap.
    auto it = std::lower_bound(starts.begin(), starts.end(), from,
                               [this](size_t start, size_t at) { return start + width <= at; });
    return it != starts.end() && *it < to;
}

std::optional<NameExtent> skip_name(Bytes msg, size_t offset, FrozenFields frozen) {
    return walk_name(msg, offset, true, frozen, [](const uint8_t*, uint8_t) {});
}

std::optional<NameExtent> skip_uncompressed_name(Bytes msg, size_t offset) {
    return walk_name(msg, offset, false, FrozenFields{}, [](const uint8_t*, uint8_t) {});
}

namespace {

template <typename Transform>
std::optional<size_t> expand_name(Bytes msg, size_t offset, NameBuffer& out, Transform&& t) {
    size_t n = 0;
    auto extent =
        walk_name(msg, offset, true, FrozenFields{}, [&](const uint8_t* label, uint8_t len) {
            out.bytes[n++] = len;
            for (uint8_t i = 0; i < len; ++i) out.bytes[n++] = t(label[i]);
        });
    if (!extent) return std::nullopt;
    out.bytes[n++] = 0;
    out.length = static_cast<uint8_t>(n);
    return extent->end;
}

}  // namespace

std::optional<size_t> read_name(Bytes msg, size_t offset, NameBuffer& out) {
    return expand_name(msg, offset, out, [](uint8_t c) { return c; });
}

std::optional<size_t> read_name_lower(Bytes msg, size_t offset, NameBuffer& out) {
    return expand_name(msg, offset, out, ascii_lower);
}

void lower_name(Bytes name, NameBuffer& out) {
    // Eight bytes at a time (every query's name passes here): add 0x20 to each byte in
    // 'A'..'Z'. Length bytes (below 64) are never in that range, so they pass unchanged.
    size_t i = 0;
    for (; i + 8 <= name.size(); i += 8) {
        uint64_t w;
        std::memcpy(&w, name.data() + i, 8);
        constexpr uint64_t kOnes = 0x0101010101010101ull;
        constexpr uint64_t kHigh = 0x8080808080808080ull;
        const uint64_t low7 = w & ~kHigh;
        const uint64_t above_at = low7 + kOnes * (0x80 - 'A');     // high bit: byte >= 'A'
        const uint64_t above_z = low7 + kOnes * (0x80 - 'Z' - 1);  // high bit: byte > 'Z'
        const uint64_t upper = above_at & ~above_z & ~w & kHigh;   // 'A'..'Z', ASCII only
        w |= upper >> 2;                                           // 0x80 >> 2 == 0x20
        std::memcpy(out.bytes + i, &w, 8);
    }
    for (; i < name.size(); ++i) out.bytes[i] = ascii_lower(name[i]);
    out.length = static_cast<uint8_t>(name.size());
}

bool name_has_suffix(Bytes name, Bytes suffix) {
    size_t offset = 0;
    while (offset < name.size()) {
        if (name.size() - offset == suffix.size() &&
            std::memcmp(name.data() + offset, suffix.data(), suffix.size()) == 0) {
            return true;
        }
        if (name[offset] == 0) return false;
        offset += 1 + size_t{name[offset]};
    }
    return false;
}

bool names_equal_ci(Bytes a, Bytes b) {
    if (a.size() != b.size()) return false;
    // Length bytes are below 64 and so unaffected by ascii_lower: one loop compares both.
    for (size_t i = 0; i < a.size(); ++i) {
        if (ascii_lower(a[i]) != ascii_lower(b[i])) return false;
    }
    return true;
}

std::optional<NameBuffer> name_from_text(std::string_view text) {
    NameBuffer out;
    if (text == ".") {
        out.bytes[0] = 0;
        out.length = 1;
        return out;
    }
    if (text.empty()) return std::nullopt;
    size_t n = 0;            // bytes written to out
    size_t label_start = 0;  // where the current label's length byte goes
    auto begin_label = [&]() -> bool {
        if (n >= kMaxNameLength) return false;
        label_start = n++;
        return true;
    };
    auto end_label = [&]() -> bool {
        const size_t len = n - label_start - 1;
        if (len == 0 || len > kMaxLabelLength) return false;
        out.bytes[label_start] = static_cast<uint8_t>(len);
        return true;
    };
    if (!begin_label()) return std::nullopt;
    for (size_t i = 0; i < text.size(); ++i) {
        uint8_t c = static_cast<uint8_t>(text[i]);
        if (c == '.') {
            if (!end_label()) return std::nullopt;
            if (i + 1 == text.size()) break;  // trailing dot: fully qualified
            if (!begin_label()) return std::nullopt;
            continue;
        }
        if (c == '\\') {
            if (i + 1 >= text.size()) return std::nullopt;
            const char d0 = text[i + 1];
            if (d0 >= '0' && d0 <= '9') {
                if (i + 3 >= text.size()) return std::nullopt;
                int value = 0;
                for (int k = 1; k <= 3; ++k) {
                    const char d = text[i + k];
                    if (d < '0' || d > '9') return std::nullopt;
                    value = value * 10 + (d - '0');
                }
                if (value > 255) return std::nullopt;
                c = static_cast<uint8_t>(value);
                i += 3;
            } else {
                c = static_cast<uint8_t>(d0);
                i += 1;
            }
        }
        if (n >= kMaxNameLength - 1) return std::nullopt;  // leave room for the root label
        out.bytes[n++] = c;
        if (i + 1 == text.size() && !end_label()) return std::nullopt;
    }
    if (n >= kMaxNameLength) return std::nullopt;
    out.bytes[n++] = 0;
    out.length = static_cast<uint8_t>(n);
    return out;
}

std::string name_to_text(Bytes wire_name) {
    std::string text;
    size_t pos = 0;
    while (pos < wire_name.size() && wire_name[pos] != 0) {
        const uint8_t len = wire_name[pos++];
        for (uint8_t i = 0; i < len && pos < wire_name.size(); ++i, ++pos) {
            const uint8_t c = wire_name[pos];
            if (needs_escape(c)) {
                if (c > 0x20 && c < 0x7F) {
                    text += '\\';
                    text += static_cast<char>(c);
                } else {
                    char buf[5];
                    std::snprintf(buf, sizeof buf, "\\%03u", c);
                    text += buf;
                }
            } else {
                text += static_cast<char>(c);
            }
        }
        text += '.';
    }
    if (text.empty()) return std::string(1, '.');
    return text;
}

bool label_offsets(std::string_view name, size_t (&offsets)[128], size_t& labels) {
    labels = 0;
    size_t offset = 0;
    while (offset < name.size()) {
        const auto label = static_cast<uint8_t>(name[offset]);
        if (label == 0) return offset + 1 == name.size();
        if (labels == std::size(offsets)) return false;
        offsets[labels++] = offset;
        offset += 1 + size_t{label};
    }
    return false;
}

}  // namespace nscache::dns
