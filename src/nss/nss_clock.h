// SPDX-License-Identifier: BSD-3-Clause
/* The module's clocks: CLOCK_MONOTONIC in milliseconds, the clock the daemon writes slot
 * expiry in, precise or coarse, read through the vDSO. Thread-safe. */
#ifndef NSCACHE_NSS_CLOCK_H
#define NSCACHE_NSS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t nss_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A memory read instead of a clock read: never ahead of nss_now_ms(), behind it by up to a
 * scheduler tick. For rate limits and "plenty of time left" checks, never a close call. */
static inline int64_t nss_coarse_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
