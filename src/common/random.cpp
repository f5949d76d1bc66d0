// SPDX-License-Identifier: BSD-3-Clause
#include "common/random.h"

#include <sys/random.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace nscache {
namespace {

struct RandomBuffer {
    uint8_t bytes[512];
    size_t used = sizeof bytes;

    void take(void* out, size_t n) {
        if (used + n > sizeof bytes) refill();
        std::memcpy(out, bytes + used, n);
        used += n;
    }

    void refill() {
        size_t filled = 0;
        while (filled < sizeof bytes) {
            const ssize_t got = getrandom(bytes + filled, sizeof bytes - filled, 0);
            if (got < 0) {
                if (errno == EINTR) continue;
                std::abort();  // no entropy source: IDs would be guessable, refuse to run
            }
            filled += static_cast<size_t>(got);
        }
        used = 0;
    }
};

thread_local RandomBuffer tls_buffer;

}  // namespace

uint64_t secure_random_u64() {
    uint64_t v;
    tls_buffer.take(&v, sizeof v);
    return v;
}

uint16_t secure_random_u16() {
    uint16_t v;
    tls_buffer.take(&v, sizeof v);
    return v;
}

}  // namespace nscache
