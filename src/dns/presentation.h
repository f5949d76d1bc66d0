// SPDX-License-Identifier: BSD-3-Clause
// DNS data as people read it: type names, record data and whole messages in dig's layout.
// Used by the command-line client (`nscache query`); pure functions on byte spans, safe on
// any input (malformed parts print as such, never read past the message).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "dns/wire.h"

namespace nscache::dns {

std::optional<uint16_t> type_from_text(std::string_view text);  // "AAAA", "aaaa", "TYPE65"
std::string type_to_text(uint16_t type);
std::string class_to_text(uint16_t rclass);
std::string rcode_to_text(uint16_t rcode);

// The whole message in dig's layout: header, flags, then each section.
std::string message_to_text(Bytes msg);

}  // namespace nscache::dns
