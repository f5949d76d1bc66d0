// SPDX-License-Identifier: BSD-3-Clause
/* Which names a name is tried as, in which order, and the h_errno a failed search ends with:
 * glibc's res_search rules over resolv.conf's search list and ndots. Thread-safe. */
#ifndef NSCACHE_NSS_SEARCH_LIST_H
#define NSCACHE_NSS_SEARCH_LIST_H

#include <stddef.h>

/* What asking one fully qualified name gave. */
enum nss_outcome {
    NSS_OUT_FOUND,    /* addresses (or PTR names) of the kind asked: stop searching */
    NSS_OUT_NOTFOUND, /* NXDOMAIN: try the next candidate */
    NSS_OUT_NODATA,   /* the name exists without the addresses asked: next candidate */
    NSS_OUT_SERVFAIL, /* the daemon's upstreams failed: next candidate, as on SERVFAIL */
    NSS_OUT_FAILED,   /* the daemon timed out or answered garbage: stop */
    NSS_OUT_BAD,      /* the daemon did not understand us, or the answer is unusable: stop */
    NSS_OUT_DOWN,     /* no daemon: stop at once, so the next NSS module answers */
};

/* Asks one candidate name (text, no trailing dot, NUL-terminated, len = strlen). */
typedef enum nss_outcome (*nss_ask_fn)(const char* name, size_t len, void* ctx);

/* Runs ask over the candidates for name, the way res_search orders them (resolv.conf read
 * through res_ninit, so LOCALDOMAIN and RES_OPTIONS count; HOSTALIASES too). Returns the outcome
 * that ended the search (FOUND, FAILED, BAD or DOWN), or, when every candidate failed,
 * NOTFOUND / NODATA / SERVFAIL for the h_errno res_search would leave: HOST_NOT_FOUND,
 * NO_DATA or TRY_AGAIN. Thread-safe. */
enum nss_outcome nss_search(const char* name, nss_ask_fn ask, void* ctx);

#endif
