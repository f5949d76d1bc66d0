/* The module's clocks, both CLOCK_MONOTONIC in milliseconds (the clock the daemon writes slot
 * expiry in), read through the vDSO. The coarse one costs a memory read but lags by up to a
 * tick; it serves rate limits and "plenty of time left" checks, never a close call. */
#ifndef NSCACHE_NSS_CLOCK_H
#define NSCACHE_NSS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t nss_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Never ahead of nss_now_ms(); behind it by at most a scheduler tick. */
static inline int64_t nss_coarse_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
