// SPDX-License-Identifier: BSD-3-Clause
/* A small client for the NSS module's tests: resolves through glibc (getaddrinfo,
 * gethostbyname*, gethostbyaddr*) or calls the module's entry points directly (dlopen), and
 * prints what came back one fact per line, for tests/integration/nss to compare.
 *
 *   nss_client gai NAME 4|6|0            getaddrinfo (AI_CANONNAME), one "addr A" per address
 *   nss_client byname NAME 4|6           gethostbyname2_r, buffer grown on ERANGE
 *   nss_client byname_small NAME 4|6     the same from a 1-byte buffer up; prints "erange N"
 *   nss_client gethostbyname NAME        gethostbyname (IPv4, non-reentrant)
 *   nss_client byaddr ADDR               gethostbyaddr_r
 *   nss_client direct MODULE FN NAME [AF] [BUFLEN]
 *        calls _nss_nscache_FN (gethostbyname4_r, gethostbyname3_r, gethostbyaddr2_r) from
 *        MODULE with errnop == &errno (as glibc does) and prints "status S errno E herrno H"
 *        and, on success, the answer.
 *   nss_client hits MODULE N NAME        _nss_nscache_gethostbyname4_r from MODULE once, then
 *                                        N times between two write(2)s of "--" (so a trace
 *                                        shows what the N calls cost); prints "ok K" (found)
 *   nss_client repeat N gai NAME 4|6|0   N lookups; prints "ok K" (same answer every time)
 *   nss_client pause N gai NAME 4|6|0    one lookup, prints "ready", waits for a line on stdin,
 *                                        then as repeat (the test changes things meanwhile)
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int family_of(const char* s) {
    return strcmp(s, "4") == 0 ? AF_INET : strcmp(s, "6") == 0 ? AF_INET6 : AF_UNSPEC;
}

static void print_addr(const char* label, int af, const void* a) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(af, a, text, sizeof text);
    printf("%s %s\n", label, text);
}

static void print_hostent(const struct hostent* h) {
    printf("name %s\n", h->h_name);
    for (char** a = h->h_aliases; *a != NULL; ++a) printf("alias %s\n", *a);
    printf("family %d\n", h->h_addrtype == AF_INET6 ? 6 : 4);
    for (char** a = h->h_addr_list; *a != NULL; ++a) print_addr("addr", h->h_addrtype, *a);
}

static int run_gai(const char* name, int af, int quiet, char* out, size_t out_size) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = af;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_CANONNAME;
    struct addrinfo* res = NULL;
    const int rc = getaddrinfo(name, NULL, &hints, &res);
    size_t used = 0;
    if (rc != 0) {
        used += (size_t)snprintf(out, out_size, "error %d\n", rc);
        if (!quiet) printf("error %d %s\n", rc, gai_strerror(rc));
        return rc;
    }
    if (res->ai_canonname != NULL && !quiet) printf("canon %s\n", res->ai_canonname);
    for (struct addrinfo* r = res; r != NULL; r = r->ai_next) {
        char text[INET6_ADDRSTRLEN];
        const void* a = r->ai_family == AF_INET6
                            ? (const void*)&((struct sockaddr_in6*)r->ai_addr)->sin6_addr
                            : (const void*)&((struct sockaddr_in*)r->ai_addr)->sin_addr;
        inet_ntop(r->ai_family, a, text, sizeof text);
        if (!quiet) printf("addr %s\n", text);
        if (used < out_size) used += (size_t)snprintf(out + used, out_size - used, "%s\n", text);
    }
    freeaddrinfo(res);
    return 0;
}

static int run_byname(const char* name, int af, size_t start) {
    size_t size = start;
    int eranges = 0;
    for (int round = 0; round < 64; ++round) {
        char* buf = malloc(size);
        struct hostent h, *hp = NULL;
        int herr = 0;
        const int rc = gethostbyname2_r(name, af, &h, buf, size, &hp, &herr);
        if (rc == ERANGE) {
            ++eranges;
            free(buf);
            size = size < 16 ? size + 1 : size * 2;
            continue;
        }
        if (start < 1024) printf("erange %d\n", eranges);
        if (hp == NULL) {
            printf("herror %d\n", herr);
        } else {
            print_hostent(hp);
        }
        free(buf);
        return hp == NULL ? 2 : 0;
    }
    printf("erange forever\n");
    return 3;
}

static int run_byaddr(const char* text) {
    unsigned char a[16];
    int af = AF_INET;
    socklen_t len = 4;
    if (inet_pton(AF_INET, text, a) != 1) {
        af = AF_INET6;
        len = 16;
        if (inet_pton(AF_INET6, text, a) != 1) return 4;
    }
    char buf[4096];
    struct hostent h, *hp = NULL;
    int herr = 0;
    gethostbyaddr_r(a, len, af, &h, buf, sizeof buf, &hp, &herr);
    if (hp == NULL) {
        printf("herror %d\n", herr);
        return 2;
    }
    print_hostent(hp);
    return 0;
}

static int run_direct(const char* module, const char* fn, const char* arg, int af, size_t buflen) {
    void* lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    if (lib == NULL) {
        printf("dlopen %s\n", dlerror());
        return 5;
    }
    char sym[128];
    snprintf(sym, sizeof sym, "_nss_nscache_%s", fn);
    void* f = dlsym(lib, sym);
    if (f == NULL) {
        printf("dlsym %s\n", sym);
        return 5;
    }
    char* buf = malloc(buflen + 1);
    /* errnop is &errno, as glibc passes it: the module must leave its answer there. */
    int err = 0, herr = 0;
    int32_t ttl = -1;
    enum nss_status st;
    errno = 0;
    if (strcmp(fn, "gethostbyname4_r") == 0) {
        struct gaih_addrtuple* pat = NULL;
        st = ((nss_gethostbyname4_r*)f)(arg, &pat, buf, buflen, &errno, &herr, &ttl);
        err = errno;
        printf("status %d errno %d herrno %d\n", st, st == NSS_STATUS_SUCCESS ? 0 : err, herr);
        if (st == NSS_STATUS_SUCCESS) {
            printf("ttl %d\n", ttl);
            for (struct gaih_addrtuple* t = pat; t != NULL; t = t->next) {
                if (t->name != NULL) printf("name %s\n", t->name);
                print_addr("addr", t->family, t->addr);
            }
        }
    } else if (strcmp(fn, "gethostbyname3_r") == 0) {
        struct hostent h;
        char* canon = NULL;
        st = ((nss_gethostbyname3_r*)f)(arg, af, &h, buf, buflen, &errno, &herr, &ttl, &canon);
        err = errno;
        printf("status %d errno %d herrno %d\n", st, st == NSS_STATUS_SUCCESS ? 0 : err, herr);
        if (st == NSS_STATUS_SUCCESS) {
            printf("ttl %d\ncanon %s\n", ttl, canon);
            print_hostent(&h);
        }
    } else {
        unsigned char a[16];
        socklen_t len = inet_pton(AF_INET, arg, a) == 1 ? 4 : 16;
        if (len == 16 && inet_pton(AF_INET6, arg, a) != 1) return 4;
        struct hostent h;
        st = ((nss_gethostbyaddr2_r*)f)(a, len, len == 4 ? AF_INET : AF_INET6, &h, buf, buflen,
                                        &errno, &herr, &ttl);
        err = errno;
        printf("status %d errno %d herrno %d\n", st, st == NSS_STATUS_SUCCESS ? 0 : err, herr);
        if (st == NSS_STATUS_SUCCESS) {
            printf("ttl %d\n", ttl);
            print_hostent(&h);
        }
    }
    free(buf);
    return 0;
}

static int run_hits(const char* module, long n, const char* name) {
    void* lib = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    nss_gethostbyname4_r* f =
        lib == NULL ? NULL : (nss_gethostbyname4_r*)dlsym(lib, "_nss_nscache_gethostbyname4_r");
    if (f == NULL) {
        printf("dlopen %s\n", dlerror());
        return 5;
    }
    static char buf[4096];
    long found = 0;
    for (long i = 0; i <= n; ++i) {
        if (i == 1 && write(1, "--\n", 3) != 3) return 6;
        struct gaih_addrtuple* pat = NULL;
        int herr = 0;
        int32_t ttl = 0;
        if (f(name, &pat, buf, sizeof buf, &errno, &herr, &ttl) == NSS_STATUS_SUCCESS && i > 0)
            ++found;
    }
    if (write(1, "--\n", 3) != 3) return 6;
    printf("ok %ld\n", found);
    return found == n ? 0 : 2;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 4 && strcmp(argv[1], "gai") == 0) {
        char out[4096];
        return run_gai(argv[2], family_of(argv[3]), 0, out, sizeof out) == 0 ? 0 : 2;
    }
    if (argc >= 4 && strcmp(argv[1], "byname") == 0)
        return run_byname(argv[2], family_of(argv[3]), 1024);
    if (argc >= 4 && strcmp(argv[1], "byname_small") == 0)
        return run_byname(argv[2], family_of(argv[3]), 1);
    if (argc >= 3 && strcmp(argv[1], "gethostbyname") == 0) {
        struct hostent* h = gethostbyname(argv[2]);
        if (h == NULL) {
            printf("herror %d\n", h_errno);
            return 2;
        }
        print_hostent(h);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "byaddr") == 0) return run_byaddr(argv[2]);
    if (argc >= 5 && strcmp(argv[1], "hits") == 0)
        return run_hits(argv[2], strtol(argv[3], NULL, 10), argv[4]);
    if (argc >= 5 && strcmp(argv[1], "direct") == 0) {
        const int af = argc >= 6 ? family_of(argv[5]) : AF_INET;
        const size_t buflen = argc >= 7 ? strtoul(argv[6], NULL, 10) : 4096;
        return run_direct(argv[2], argv[3], argv[4], af, buflen);
    }
    if (argc >= 6 && (strcmp(argv[1], "repeat") == 0 || strcmp(argv[1], "pause") == 0) &&
        strcmp(argv[3], "gai") == 0) {
        const long n = strtol(argv[2], NULL, 10);
        char first[4096] = "", cur[4096];
        long same = 0;
        if (strcmp(argv[1], "pause") == 0) {
            run_gai(argv[4], family_of(argv[5]), 1, first, sizeof first);
            printf("ready\n");
            char line[64];
            if (fgets(line, sizeof line, stdin) == NULL) return 2;
        }
        for (long i = 0; i < n; ++i) {
            run_gai(argv[4], family_of(argv[5]), 1, cur, sizeof cur);
            if (i == 0 && first[0] == '\0') strcpy(first, cur);
            same += strcmp(first, cur) == 0;
        }
        printf("ok %ld\n%s", same, first);
        return same == n ? 0 : 2;
    }
    fprintf(stderr, "usage: see the comment at the top of nss_client.c\n");
    return 64;
}
