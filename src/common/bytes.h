// SPDX-License-Identifier: BSD-3-Clause
// memcpy for spans that may be empty: an empty vector's data() may be null, and memcpy with a
// null source is undefined even for zero bytes (UBSan aborts on it).
#pragma once

#include <cstddef>
#include <cstring>

namespace nscache {

inline void copy_bytes(void* to, const void* from, size_t n) {
    if (n != 0) std::memcpy(to, from, n);
}

}  // namespace nscache
