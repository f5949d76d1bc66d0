// SPDX-License-Identifier: BSD-3-Clause
// Domain names in wire format (RFC 1035 §3.1, §4.1.4): walking, expanding and comparing,
// plus conversion to and from presentation text. Pure functions on byte spans.
//
// Compression pointers are followed only backwards, each to an offset smaller than the one
// before, so a name always terminates: a loop or a forward pointer is a parse error. Real
// servers only ever point backwards, to names they already wrote, and never into the header.
// A name may follow at most kMaxPointerHops pointers, so walking one costs at most its
// 255 expanded bytes plus that many hops, however the message chains its pointers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "dns/wire.h"

namespace nscache::dns {

// Backward pointers alone do not bound the work: a message can chain a thousand pointers and
// point a hundred records at the chain's end (a 4 KB query costs 10^5 hops, a 64 KB answer
// 10^7 or more). A compressor points a name at the longest suffix it already wrote, so a
// chain grows by one hop only for each earlier name exactly one label shorter: real answers
// need one hop or a few. 16 leaves a wide margin over that, is what dnspython's parser allows
// (unbound allows 256), and keeps a name's hops well under its 255 label bytes.
inline constexpr int kMaxPointerHops = 16;

#ifdef NSCACHE_WORK_COUNTERS
// Fuzz builds only: compression pointers followed on this thread, so a fuzz target can check
// that its work stays proportional to its input.
namespace work_counters {
inline thread_local uint64_t pointer_hops = 0;
}
#endif

// A name buffer large enough for any valid name.
struct NameBuffer {
    uint8_t bytes[kMaxNameLength];
    uint8_t length = 0;

    Bytes view() const { return Bytes(bytes, length); }
};

// Where a name that starts at some offset ends in the message (the offset just after its
// last label or pointer), and its expanded wire length.
struct NameExtent {
    size_t end = 0;
    size_t wire_length = 0;
};

// Fields of a message that a compressed name must never read through a pointer, because they
// change when the message is sent again from the cache: the TTLs. Each field starts at an
// offset in `starts` (ascending, not overlapping) and is `width` bytes long.
struct FrozenFields {
    std::span<const size_t> starts;
    size_t width = 0;

    bool overlaps(size_t from, size_t to) const;  // any field byte in [from, to)
};

// Walks a possibly compressed name at `offset`. nullopt for a truncated name, a label over 63
// bytes, an expanded name over 255 bytes, a reserved label type, more than kMaxPointerHops
// pointers, or a bad pointer: one that points forwards, into the header, at a name that does
// not end before this one starts, or at bytes of a `frozen` field.
std::optional<NameExtent> skip_name(Bytes msg, size_t offset, FrozenFields frozen = {});

// A name that must not be compressed (a query's question): same checks, and any pointer is
// an error.
std::optional<NameExtent> skip_uncompressed_name(Bytes msg, size_t offset);

// Expands the name at `offset` into `out` as it is written (case kept), following pointers.
// Returns the offset after the name in the message, or nullopt as for skip_name.
std::optional<size_t> read_name(Bytes msg, size_t offset, NameBuffer& out);

// Expands the name at `offset` into `out`, lower-cased, following pointers. Returns the
// offset after the name in the message, or nullopt as for skip_name.
std::optional<size_t> read_name_lower(Bytes msg, size_t offset, NameBuffer& out);

// Lower-cases an uncompressed wire name into `out`. The input must be valid.
void lower_name(Bytes name, NameBuffer& out);

// Whether uncompressed wire name `name` is `suffix` or under it (label-wise, case kept:
// both lower-cased by the caller). The root name is a suffix of every name.
bool name_has_suffix(Bytes name, Bytes suffix);

// Case-insensitive comparison of two uncompressed wire names.
bool names_equal_ci(Bytes a, Bytes b);

// "www.Example.com" or "www.example.com." -> wire format, case kept. Accepts \DDD and \X
// escapes. nullopt for an empty label, a label over 63 bytes or a name over 255.
std::optional<NameBuffer> name_from_text(std::string_view text);

// Wire format (uncompressed) -> presentation text with a trailing dot; bytes outside
// printable ASCII and the characters . \ ( ) ; " $ @ are escaped.
std::string name_to_text(Bytes wire_name);

// An uncompressed wire name's bytes as text (for string-keyed tables of names).
inline std::string_view name_chars(Bytes name) {
    return std::string_view(reinterpret_cast<const char*>(name.data()), name.size());
}

// The label offsets of a well-formed uncompressed wire name, its root label not counted;
// false for a name whose labels run past its end, that has no root label, or that has more
// than 128 labels (a 255-byte name has at most 127).
bool label_offsets(std::string_view name, size_t (&offsets)[128], size_t& labels);

}  // namespace nscache::dns
