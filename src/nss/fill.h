// SPDX-License-Identifier: BSD-3-Clause
/* Writing answers into the caller's buffer as glibc's NSS interface wants them (a struct
 * hostent or a gaih_addrtuple list); ERANGE when it is short. No shared state. */
#ifndef NSCACHE_NSS_FILL_H
#define NSCACHE_NSS_FILL_H

#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"

/* Both fillers report a short buffer as status TRYAGAIN, errno ERANGE, h_errno NETDB_INTERNAL,
 * and then leave the caller's result untouched. */

/* By name: h_name is the canonical name (fallback_name if the answer's is unusable), h_aliases
 * the CNAME owners, h_addr_list the addresses of family af (AF_INET or AF_INET6).
 * By address (addr != NULL): h_name is the first PTR name, h_aliases the others, h_addr_list
 * the one address asked. *canonp (if canonp is not NULL) points at h_name. */
enum nss_status nss_fill_hostent(const struct nss_payload* p, int af, const char* fallback_name,
                                 const uint8_t* addr, struct hostent* h, char* buf, size_t buflen,
                                 int* errnop, int* h_errnop, char** canonp);

/* For gethostbyname4_r: IPv4 addresses first, then IPv6; the first tuple carries the canonical
 * name. If *pat is not NULL it is used as the first tuple (older glibc passes one). */
enum nss_status nss_fill_addrtuple(const struct nss_payload* p, const char* fallback_name,
                                   struct gaih_addrtuple** pat, char* buf, size_t buflen,
                                   int* errnop, int* h_errnop);

/* Shared by both: the name to report as canonical. */
static inline void nss_fill_pick_name(const struct nss_payload* p, const char* fallback,
                                      const char** name, size_t* len) {
    if (p->canon != NULL && nss_name_ok(p->canon, p->canon_len)) {
        *name = p->canon;
        *len = p->canon_len;
    } else {
        *name = fallback;
        *len = 0;
        while (fallback[*len] != '\0') ++*len;
    }
}

static inline enum nss_status nss_fill_erange(int* errnop, int* h_errnop) {
    *errnop = ERANGE; /* the caller grows its buffer and calls again */
    *h_errnop = NETDB_INTERNAL;
    return NSS_STATUS_TRYAGAIN;
}

#endif
