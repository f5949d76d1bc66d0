/* The module's one clock: CLOCK_MONOTONIC in milliseconds, the clock the daemon writes slot
 * expiry in. Read through the vDSO: no system call. */
#ifndef NSCACHE_NSS_CLOCK_H
#define NSCACHE_NSS_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t nss_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

#endif
