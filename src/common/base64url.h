// SPDX-License-Identifier: BSD-3-Clause
// The base64url encoding (RFC 4648 §5), as DNS over HTTPS carries a query in a GET request's
// `dns` parameter (RFC 8484 §4.1): the URL- and filename-safe alphabet, without the trailing
// '=' padding. Pure functions, callable from any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace nscache {

// The bytes `text` encodes, or nullopt when it holds a character outside the alphabet, a
// length no encoding has (one character past a multiple of four), or bits set in the last
// character's unused low bits (so that each byte string has exactly one encoding). Trailing
// '=' padding is accepted although RFC 8484 says it is left out: some clients send it.
// The output is at most 3/4 of the input's length.
std::optional<std::vector<uint8_t>> decode_base64url(std::string_view text);

// The encoding of `bytes`, without padding (for tests and the DoH upstream side).
std::string encode_base64url(const uint8_t* bytes, size_t size);

}  // namespace nscache
