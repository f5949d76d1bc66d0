// SPDX-License-Identifier: BSD-3-Clause
// EDNS(0) Padding (RFC 7830) of answers over encrypted transports: RFC 8467 §4.1 pads a
// response to a padded query to a multiple of 468 octets, so that its size says little of
// the name asked. Pure functions on message bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "dns/wire.h"

namespace nscache::dns {

inline constexpr uint16_t kOptionPadding = 12;
inline constexpr size_t kResponsePaddingBlock = 468;

// Whether the OPT rdata `options` (RFC 6891 §6.1.2) carries a Padding option. A malformed
// list says no: it is not ours to refuse.
bool options_have_padding(Bytes options);

// Pads the response of `length` bytes in `buffer` (which may hold more) by adding a Padding
// option to its OPT record, so that it becomes a multiple of kResponsePaddingBlock; less when
// the buffer or 65535 bytes would not take it all. Returns the new length: `length` itself
// when the response has no OPT record, is malformed, or has no room for an option at all.
size_t pad_response(std::span<uint8_t> buffer, size_t length);

}  // namespace nscache::dns
