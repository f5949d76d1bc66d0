// SPDX-License-Identifier: BSD-3-Clause
// Extended DNS Errors (RFC 8914): an EDNS option (code 15) that says why an answer is what it
// is. nscache adds one to the answers it makes itself (its own SERVFAILs, stale answers,
// REFUSED) and passes an upstream's own on only with that upstream's answer. Pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "dns/wire.h"

namespace nscache::dns {

inline constexpr uint16_t kEdeOptionCode = 15;

// The INFO-CODEs nscache sends (RFC 8914 §4).
namespace ede {
inline constexpr uint16_t StaleAnswer = 3;
inline constexpr uint16_t Prohibited = 18;
// A query without RD for data nscache does not hold (RFC 8914 §4.21).
inline constexpr uint16_t NotAuthoritative = 20;
inline constexpr uint16_t NoReachableAuthority = 22;
inline constexpr uint16_t NetworkError = 23;
}  // namespace ede

// OPTION-CODE, OPTION-LENGTH and an INFO-CODE without EXTRA-TEXT.
inline constexpr size_t kEdeOptionSize = 6;

inline void write_ede_option(uint8_t* out, uint16_t info_code) {
    write_u16(out, kEdeOptionCode);
    write_u16(out + 2, 2);
    write_u16(out + 4, info_code);
}

// Copies the EDE options of an OPT record's rdata (every other option is dropped) to `out`,
// as they were. False when the options are malformed (an option running past the rdata, or
// an EDE shorter than its INFO-CODE).
bool copy_ede_options(Bytes opt_rdata, std::vector<uint8_t>& out);

}  // namespace nscache::dns
