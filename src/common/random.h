// SPDX-License-Identifier: BSD-3-Clause
// Unpredictable numbers for what an off-path attacker must not guess: upstream query IDs
// and hash seeds. Every value comes from the kernel's CSPRNG (getrandom(2)); a per-thread
// buffer makes that one system call per 512 bytes instead of one per query.
#pragma once

#include <cstdint>

namespace nscache {

uint64_t secure_random_u64();
uint16_t secure_random_u16();

}  // namespace nscache
