// SPDX-License-Identifier: BSD-3-Clause
/* The six entry points glibc looks up in libnss_nscache.so.2, with the status, errno and
 * h_errno conventions of glibc's own dns module. The only exported symbols. */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <nss.h>
#include <string.h>
#include <sys/socket.h>

#include "fill.h"
#include "lookup.h"
#include "search_list.h"

#define NSS_EXPORT __attribute__((visibility("default")))

/* Declared through nss.h's typedefs, so a signature that drifts from glibc's fails to build. */
NSS_EXPORT nss_gethostbyname4_r _nss_nscache_gethostbyname4_r;
NSS_EXPORT nss_gethostbyname3_r _nss_nscache_gethostbyname3_r;
NSS_EXPORT nss_gethostbyname2_r _nss_nscache_gethostbyname2_r;
NSS_EXPORT nss_gethostbyname_r _nss_nscache_gethostbyname_r;
NSS_EXPORT nss_gethostbyaddr2_r _nss_nscache_gethostbyaddr2_r;
NSS_EXPORT nss_gethostbyaddr_r _nss_nscache_gethostbyaddr_r;

/* One by-name lookup in flight: what the search asks, and the name that answered. */
struct name_query {
    int family;
    int64_t deadline_ms;
    struct nss_answer answer;
    char found_name[256];
};

static enum nss_outcome ask_name(const char* name, size_t len, void* ctx) {
    struct name_query* q = ctx;
    const enum nss_outcome o = nss_lookup_name(name, len, q->family, &q->deadline_ms, &q->answer);
    if (o == NSS_OUT_FOUND && len < sizeof q->found_name) memcpy(q->found_name, name, len + 1);
    return o;
}

/* glibc passes errnop == &errno: errno is restored first and *errnop written last, so the
 * ERANGE that asks glibc for a bigger buffer survives (restoring errno after it erased it). */
static void finish_errno(int olderr, int err, int* errnop) {
    errno = olderr;
    if (err != 0) *errnop = err;
}

/* Everything but FOUND, as a status with errno and h_errno. */
static enum nss_status failure(enum nss_outcome o, int saved_errno, int* errnop, int* h_errnop) {
    switch (o) {
        case NSS_OUT_NOTFOUND:
            *errnop = ENOENT;
            *h_errnop = HOST_NOT_FOUND;
            return NSS_STATUS_NOTFOUND;
        case NSS_OUT_NODATA:
            *errnop = ENOENT;
            *h_errnop = NO_DATA;
            return NSS_STATUS_NOTFOUND;
        case NSS_OUT_SERVFAIL:
        case NSS_OUT_FAILED:
            *errnop = EAGAIN;
            *h_errnop = TRY_AGAIN;
            return NSS_STATUS_TRYAGAIN;
        case NSS_OUT_DOWN:
            /* No daemon: UNAVAIL at once, so "dns" after us in nsswitch.conf answers. */
            *errnop = saved_errno != 0 ? saved_errno : ECONNREFUSED;
            *h_errnop = NO_RECOVERY;
            return NSS_STATUS_UNAVAIL;
        default:
            *errnop = EBADMSG;
            *h_errnop = NO_RECOVERY;
            return NSS_STATUS_UNAVAIL;
    }
}

/* Runs the search for name; on FOUND the answer stays in q for the caller to fill from. */
static enum nss_outcome search_name(const char* name, struct name_query* q) {
    q->deadline_ms = 0; /* set when the first question needs the socket */
    q->found_name[0] = '\0';
    nss_reply_init(&q->answer.reply);
    return nss_search(name, ask_name, q);
}

enum nss_status _nss_nscache_gethostbyname4_r(const char* name, struct gaih_addrtuple** pat,
                                              char* buffer, size_t buflen, int* errnop,
                                              int* h_errnop, int32_t* ttlp) {
    const int olderr = errno;
    int err = 0;
    struct name_query q; /* not zeroed: it holds a 1 KiB reply buffer */
    q.family = AF_UNSPEC;
    const enum nss_outcome o = search_name(name, &q);
    enum nss_status status;
    if (o == NSS_OUT_FOUND) {
        status = nss_fill_addrtuple(&q.answer.payload, q.found_name, pat, buffer, buflen, &err,
                                    h_errnop);
        if (status == NSS_STATUS_SUCCESS && ttlp != NULL) *ttlp = (int32_t)q.answer.reply.ttl;
    } else {
        status = failure(o, errno, &err, h_errnop);
    }
    nss_reply_release(&q.answer.reply);
    finish_errno(olderr, err, errnop);
    return status;
}

enum nss_status _nss_nscache_gethostbyname3_r(const char* name, int af, struct hostent* result,
                                              char* buffer, size_t buflen, int* errnop,
                                              int* h_errnop, int32_t* ttlp, char** canonp) {
    if (af != AF_INET && af != AF_INET6) {
        *errnop = EAFNOSUPPORT;
        *h_errnop = NETDB_INTERNAL;
        return NSS_STATUS_UNAVAIL;
    }
    const int olderr = errno;
    int err = 0;
    struct name_query q;
    q.family = af;
    const enum nss_outcome o = search_name(name, &q);
    enum nss_status status;
    if (o == NSS_OUT_FOUND) {
        status = nss_fill_hostent(&q.answer.payload, af, q.found_name, NULL, result, buffer, buflen,
                                  &err, h_errnop, canonp);
        if (status == NSS_STATUS_SUCCESS && ttlp != NULL) *ttlp = (int32_t)q.answer.reply.ttl;
    } else {
        status = failure(o, errno, &err, h_errnop);
    }
    nss_reply_release(&q.answer.reply);
    finish_errno(olderr, err, errnop);
    return status;
}

enum nss_status _nss_nscache_gethostbyname2_r(const char* name, int af, struct hostent* result,
                                              char* buffer, size_t buflen, int* errnop,
                                              int* h_errnop) {
    return _nss_nscache_gethostbyname3_r(name, af, result, buffer, buflen, errnop, h_errnop, NULL,
                                         NULL);
}

enum nss_status _nss_nscache_gethostbyname_r(const char* name, struct hostent* result, char* buffer,
                                             size_t buflen, int* errnop, int* h_errnop) {
    /* glibc dropped RES_USE_INET6 in 2.26: plain gethostbyname is IPv4. */
    return _nss_nscache_gethostbyname3_r(name, AF_INET, result, buffer, buflen, errnop, h_errnop,
                                         NULL, NULL);
}

enum nss_status _nss_nscache_gethostbyaddr2_r(const void* addr, socklen_t len, int af,
                                              struct hostent* result, char* buffer, size_t buflen,
                                              int* errnop, int* h_errnop, int32_t* ttlp) {
    static const uint8_t mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t compat[12] = {0};
    static const uint8_t loopback_tail[4] = {0, 0, 0, 1};
    const uint8_t* a = addr;
    /* As glibc's dns module: an IPv4-mapped (or IPv4-compatible, except ::1) IPv6 address is
     * looked up as the IPv4 address. */
    if (af == AF_INET6 && len == 16 &&
        (memcmp(a, mapped, 12) == 0 ||
         (memcmp(a, compat, 12) == 0 && memcmp(a + 12, loopback_tail, 4) != 0))) {
        a += 12;
        af = AF_INET;
        len = 4;
    }
    const size_t size = af == AF_INET ? 4 : af == AF_INET6 ? 16 : 0;
    if (size == 0 || len < size) {
        *errnop = EAFNOSUPPORT;
        *h_errnop = NETDB_INTERNAL;
        return NSS_STATUS_UNAVAIL;
    }
    const int olderr = errno;
    int err = 0;
    struct nss_answer answer;
    nss_reply_init(&answer.reply);
    int64_t deadline_ms = 0;
    const enum nss_outcome o = nss_lookup_addr(a, size, af, &deadline_ms, &answer);
    enum nss_status status;
    if (o == NSS_OUT_FOUND) {
        status = nss_fill_hostent(&answer.payload, af, "", a, result, buffer, buflen, &err,
                                  h_errnop, NULL);
        if (status == NSS_STATUS_SUCCESS && ttlp != NULL) *ttlp = (int32_t)answer.reply.ttl;
    } else {
        status = failure(o, errno, &err, h_errnop);
    }
    nss_reply_release(&answer.reply);
    finish_errno(olderr, err, errnop);
    return status;
}

enum nss_status _nss_nscache_gethostbyaddr_r(const void* addr, socklen_t len, int af,
                                             struct hostent* result, char* buffer, size_t buflen,
                                             int* errnop, int* h_errnop) {
    return _nss_nscache_gethostbyaddr2_r(addr, len, af, result, buffer, buflen, errnop, h_errnop,
                                         NULL);
}
