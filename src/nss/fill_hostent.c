// SPDX-License-Identifier: BSD-3-Clause
/* Fills a struct hostent and its pointer arrays, addresses and names inside the caller's
 * buffer, after measuring that everything fits. */
#include <errno.h>
#include <netinet/in.h>
#include <stdalign.h>
#include <string.h>
#include <sys/socket.h>

#include "fill.h"

enum nss_status nss_fill_hostent(const struct nss_payload* p, int af, const char* fallback_name,
                                 const uint8_t* addr, struct hostent* h, char* buf, size_t buflen,
                                 int* errnop, int* h_errnop, char** canonp) {
    const size_t alen = af == AF_INET6 ? 16 : 4;
    const uint8_t* addrs = addr != NULL ? addr : af == AF_INET6 ? p->addr6 : p->addr4;
    const size_t naddr = addr != NULL ? 1 : af == AF_INET6 ? p->addr6_count : p->addr4_count;

    const char* name;
    size_t name_len;
    nss_fill_pick_name(p, fallback_name, &name, &name_len);

    /* Measure: aliases that pass the name check, and the bytes of every string. */
    size_t nalias = 0, strings = name_len + 1;
    const uint8_t* cur = p->aliases;
    for (uint16_t i = 0; i < p->alias_count; ++i) {
        const char* a;
        uint16_t alen16;
        nss_payload_next_alias(&cur, &a, &alen16);
        if (!nss_name_ok(a, alen16)) continue;
        ++nalias;
        strings += (size_t)alen16 + 1;
    }
    const size_t pad = (alignof(char*) - (uintptr_t)buf % alignof(char*)) % alignof(char*);
    const size_t pointers = (naddr + 1 + nalias + 1) * sizeof(char*);
    if (buflen < pad || buflen - pad < pointers + naddr * alen + strings)
        return nss_fill_erange(errnop, h_errnop);

    char** addr_list = (char**)(void*)(buf + pad);
    char** alias_list = addr_list + naddr + 1;
    char* out = (char*)(alias_list + nalias + 1);
    for (size_t i = 0; i < naddr; ++i) {
        memcpy(out, addrs + i * alen, alen);
        addr_list[i] = out;
        out += alen;
    }
    addr_list[naddr] = NULL;

    memcpy(out, name, name_len);
    out[name_len] = '\0';
    h->h_name = out;
    out += name_len + 1;

    size_t k = 0;
    cur = p->aliases;
    for (uint16_t i = 0; i < p->alias_count; ++i) {
        const char* a;
        uint16_t alen16;
        nss_payload_next_alias(&cur, &a, &alen16);
        if (!nss_name_ok(a, alen16)) continue;
        memcpy(out, a, alen16);
        out[alen16] = '\0';
        alias_list[k++] = out;
        out += (size_t)alen16 + 1;
    }
    alias_list[k] = NULL;

    h->h_aliases = alias_list;
    h->h_addrtype = af;
    h->h_length = (int)alen;
    h->h_addr_list = addr_list;
    if (canonp != NULL) *canonp = h->h_name;
    *h_errnop = NETDB_SUCCESS;
    (void)errnop;
    return NSS_STATUS_SUCCESS;
}
