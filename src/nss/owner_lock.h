// SPDX-License-Identifier: BSD-3-Clause
/* A try-lock whose word holds the owner's pid, for the module's rare slow paths (opening the
 * map, reloading resolv.conf). A child forked while another thread held it steals it. */
#ifndef NSCACHE_NSS_OWNER_LOCK_H
#define NSCACHE_NSS_OWNER_LOCK_H

#include <stdbool.h>
#include <sys/types.h>
#include <unistd.h>

/* Never blocks: false means another thread of this process is doing the work now. A lock
 * word naming another pid was inherited through fork() from a thread that does not exist
 * here, so it is taken over. */
static inline bool owner_lock_try(int* word) {
    const int self = (int)getpid();
    int seen = 0;
    if (__atomic_compare_exchange_n(word, &seen, self, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return true;
    if (seen == self) return false;
    return __atomic_compare_exchange_n(word, &seen, self, false, __ATOMIC_ACQUIRE,
                                       __ATOMIC_RELAXED);
}

static inline void owner_lock_release(int* word) {
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
}

#endif
