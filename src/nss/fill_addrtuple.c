// SPDX-License-Identifier: BSD-3-Clause
/* Fills the gaih_addrtuple list gethostbyname4_r returns to getaddrinfo: tuples at the
 * aligned start of the caller's buffer, the canonical name after them. */
#include <netinet/in.h>
#include <stdalign.h>
#include <string.h>
#include <sys/socket.h>

#include "fill.h"

enum nss_status nss_fill_addrtuple(const struct nss_payload* p, const char* fallback_name,
                                   struct gaih_addrtuple** pat, char* buf, size_t buflen,
                                   int* errnop, int* h_errnop) {
    const char* name;
    size_t name_len;
    nss_fill_pick_name(p, fallback_name, &name, &name_len);

    const size_t total = (size_t)p->addr4_count + p->addr6_count;
    if (total == 0) {
        *h_errnop = NO_DATA;
        return NSS_STATUS_NOTFOUND;
    }
    const size_t given = *pat != NULL ? 1 : 0; /* a tuple the caller supplied */
    const size_t align = alignof(struct gaih_addrtuple);
    const size_t pad = (align - (uintptr_t)buf % align) % align;
    const size_t tuples = (total - given) * sizeof(struct gaih_addrtuple);
    if (buflen < pad || buflen - pad < tuples + name_len + 1)
        return nss_fill_erange(errnop, h_errnop);

    struct gaih_addrtuple* mine = (struct gaih_addrtuple*)(void*)(buf + pad);
    char* name_copy = buf + pad + tuples;
    memcpy(name_copy, name, name_len);
    name_copy[name_len] = '\0';

    struct gaih_addrtuple** link = pat;
    struct gaih_addrtuple* first = *pat;
    for (size_t i = 0; i < total; ++i) {
        struct gaih_addrtuple* t = (i == 0 && first != NULL) ? first : mine++;
        memset(t, 0, sizeof *t);
        if (i < p->addr4_count) {
            t->family = AF_INET;
            memcpy(t->addr, p->addr4 + i * 4, 4);
        } else {
            t->family = AF_INET6;
            memcpy(t->addr, p->addr6 + (i - p->addr4_count) * 16, 16);
        }
        t->name = i == 0 ? name_copy : NULL;
        *link = t;
        link = &t->next;
    }
    *link = NULL;
    *h_errnop = NETDB_SUCCESS;
    (void)errnop;
    return NSS_STATUS_SUCCESS;
}
