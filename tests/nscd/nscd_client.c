// SPDX-License-Identifier: BSD-3-Clause
/* glibc's own resolver calls, for the nscd front's tests (tests/integration/nscd): whatever
 * answers them (nscache through glibc's built-in nscd client, or `files dns` straight) is
 * printed one fact per line, for the tests to compare.
 *
 *   nscd_client gai NAME 4|6|0 FLAGS      getaddrinfo; FLAGS: "-" or a comma list of canon,
 *                                         addrconfig; prints "addr A" in order, "canon C"
 *   nscd_client byname NAME 4|6           gethostbyname2_r: "name", "alias", "addr" lines,
 *                                         or "herrno H"
 *   nscd_client gethostbyname NAME        gethostbyname
 *   nscd_client byaddr ADDR               gethostbyaddr_r
 *   nscd_client warm NAME 4|6|0 FLAGS     getaddrinfo twice, with write(2)s of "--" around
 *                                         the second (a trace shows what a warm call costs)
 *   nscd_client pause NAME 4|6|0 FLAGS    getaddrinfo, prints "ready", waits for a line on
 *                                         stdin, then one more between write(2)s of "--"
 *                                         (printed as gai prints)
 *   nscd_client loop SECONDS NAME 4|6|0 FLAGS
 *                                         getaddrinfo every 20 ms for SECONDS: "ok N", or
 *                                         "error N" at the first failure
 *   nscd_client stress SECONDS THREADS PREFIX COUNT
 *        THREADS threads resolve PREFIX<i>.stress.test (i < COUNT) with getaddrinfo and
 *        gethostbyname2_r for SECONDS; every answer must be 10.(i/256).(i%256).1 (and
 *        fd00::<i> for IPv6), alone: prints "ok N" or "bad ..." and exits 1.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static int family_of(const char* s) {
    return strcmp(s, "4") == 0 ? AF_INET : strcmp(s, "6") == 0 ? AF_INET6 : AF_UNSPEC;
}

static int flags_of(const char* s) {
    int f = 0;
    if (strstr(s, "canon") != NULL) f |= AI_CANONNAME;
    if (strstr(s, "addrconfig") != NULL) f |= AI_ADDRCONFIG;
    return f;
}

static void print_addr(const char* label, int af, const void* a) {
    char text[INET6_ADDRSTRLEN];
    inet_ntop(af, a, text, sizeof text);
    printf("%s %s\n", label, text);
}

static int gai(const char* name, int af, int flags, int print) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = af;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = flags;
    struct addrinfo* res = NULL;
    const int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        if (print) printf("error %d\n", rc);
        return 1;
    }
    for (struct addrinfo* p = res; p != NULL; p = p->ai_next) {
        if (print && p->ai_canonname != NULL) printf("canon %s\n", p->ai_canonname);
        if (!print) continue;
        if (p->ai_family == AF_INET) {
            print_addr("addr", AF_INET, &((struct sockaddr_in*)p->ai_addr)->sin_addr);
        } else {
            print_addr("addr", AF_INET6, &((struct sockaddr_in6*)p->ai_addr)->sin6_addr);
        }
    }
    freeaddrinfo(res);
    return 0;
}

static void print_hostent(const struct hostent* h) {
    printf("name %s\n", h->h_name);
    for (char** a = h->h_aliases; *a != NULL; ++a) printf("alias %s\n", *a);
    printf("family %d\n", h->h_addrtype == AF_INET6 ? 6 : 4);
    for (char** a = h->h_addr_list; *a != NULL; ++a) print_addr("addr", h->h_addrtype, *a);
}

static int byname(const char* name, int af) {
    struct hostent he, *result = NULL;
    size_t size = 1024;
    char* buffer = malloc(size);
    int herr = 0, rc;
    while ((rc = gethostbyname2_r(name, af, &he, buffer, size, &result, &herr)) == ERANGE) {
        size *= 2;
        buffer = realloc(buffer, size);
    }
    if (result == NULL) {
        printf("herrno %d\n", herr);
    } else {
        print_hostent(result);
    }
    free(buffer);
    return result == NULL;
}

static int byaddr(const char* text) {
    unsigned char a[16];
    int af = AF_INET;
    socklen_t len = 4;
    if (inet_pton(AF_INET, text, a) != 1) {
        if (inet_pton(AF_INET6, text, a) != 1) return 2;
        af = AF_INET6;
        len = 16;
    }
    struct hostent he, *result = NULL;
    char buffer[8192];
    int herr = 0;
    gethostbyaddr_r(a, len, af, &he, buffer, sizeof buffer, &result, &herr);
    if (result == NULL) {
        printf("herrno %d\n", herr);
        return 1;
    }
    print_hostent(result);
    return 0;
}

/* ---- stress ----------------------------------------------------------------------------- */

static double g_deadline;
static const char* g_prefix;
static int g_count;
static long g_ok;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void bad(const char* what, const char* name) {
    printf("bad %s %s\n", what, name);
    fflush(stdout);
    exit(1);
}

static void* stress_thread(void* arg) {
    unsigned seed = (unsigned)(uintptr_t)arg * 2654435761u ^ (unsigned)getpid();
    long ok = 0;
    char name[128];
    while (now_s() < g_deadline) {
        const int i = (int)(rand_r(&seed) % (unsigned)g_count);
        snprintf(name, sizeof name, "%s%d.stress.test", g_prefix, i);
        const unsigned char want4[4] = {10, (unsigned char)(i / 256), (unsigned char)(i % 256), 1};
        unsigned char want6[16] = {0xfd, 0};
        want6[14] = (unsigned char)(i / 256);
        want6[15] = (unsigned char)(i % 256);
        const int kind = (int)(rand_r(&seed) % 3);
        if (kind == 0) {
            struct hostent he, *r = NULL;
            char buffer[4096];
            int herr = 0;
            gethostbyname2_r(name, AF_INET, &he, buffer, sizeof buffer, &r, &herr);
            /* a failure (the daemon declined, an upstream timeout) falls back: it must
             * still be right, and never a wrong address */
            if (r == NULL) bad("byname-notfound", name);
            if (r->h_addr_list[0] == NULL || r->h_addr_list[1] != NULL ||
                memcmp(r->h_addr_list[0], want4, 4) != 0 || strcmp(r->h_name, name) != 0)
                bad("byname-answer", name);
        } else {
            struct addrinfo hints, *res = NULL;
            memset(&hints, 0, sizeof hints);
            hints.ai_family = kind == 1 ? AF_UNSPEC : AF_INET6;
            hints.ai_socktype = SOCK_STREAM;
            hints.ai_flags = AI_CANONNAME;
            if (getaddrinfo(name, NULL, &hints, &res) != 0) bad("gai-error", name);
            int n4 = 0, n6 = 0;
            for (struct addrinfo* p = res; p != NULL; p = p->ai_next) {
                if (p == res && (p->ai_canonname == NULL || strcmp(p->ai_canonname, name) != 0))
                    bad("gai-canon", name);
                if (p->ai_family == AF_INET) {
                    ++n4;
                    if (memcmp(&((struct sockaddr_in*)p->ai_addr)->sin_addr, want4, 4) != 0)
                        bad("gai-addr4", name);
                } else {
                    ++n6;
                    if (memcmp(&((struct sockaddr_in6*)p->ai_addr)->sin6_addr, want6, 16) != 0)
                        bad("gai-addr6", name);
                }
            }
            if (n6 != 1 || n4 != (kind == 1 ? 1 : 0)) bad("gai-count", name);
            freeaddrinfo(res);
        }
        ++ok;
    }
    pthread_mutex_lock(&g_mu);
    g_ok += ok;
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static int stress(double seconds, int threads, const char* prefix, int count) {
    g_deadline = now_s() + seconds;
    g_prefix = prefix;
    g_count = count;
    pthread_t t[64];
    if (threads > 64) threads = 64;
    for (int i = 0; i < threads; ++i)
        pthread_create(&t[i], NULL, stress_thread, (void*)(uintptr_t)i);
    for (int i = 0; i < threads; ++i) pthread_join(t[i], NULL);
    printf("ok %ld\n", g_ok);
    return 0;
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc >= 5 && strcmp(argv[1], "gai") == 0) {
        return gai(argv[2], family_of(argv[3]), flags_of(argv[4]), 1);
    }
    if (argc >= 5 && strcmp(argv[1], "warm") == 0) {
        gai(argv[2], family_of(argv[3]), flags_of(argv[4]), 0);
        if (write(1, "--\n", 3) != 3) return 2;
        const int rc = gai(argv[2], family_of(argv[3]), flags_of(argv[4]), 0);
        if (write(1, "--\n", 3) != 3) return 2;
        return rc;
    }
    if (argc >= 5 && strcmp(argv[1], "pause") == 0) {
        gai(argv[2], family_of(argv[3]), flags_of(argv[4]), 0);
        printf("ready\n");
        char line[16];
        if (fgets(line, sizeof line, stdin) == NULL) return 2;
        if (write(1, "--\n", 3) != 3) return 2;
        const int rc = gai(argv[2], family_of(argv[3]), flags_of(argv[4]), 1);
        if (write(1, "--\n", 3) != 3) return 2;
        return rc;
    }
    if (argc >= 6 && strcmp(argv[1], "loop") == 0) {
        const double end = now_s() + atof(argv[2]);
        long n = 0;
        while (now_s() < end) {
            if (gai(argv[3], family_of(argv[4]), flags_of(argv[5]), 0) != 0) {
                printf("error %ld\n", n);
                return 1;
            }
            ++n;
            usleep(20000);
        }
        printf("ok %ld\n", n);
        return 0;
    }
    if (argc >= 4 && strcmp(argv[1], "byname") == 0) return byname(argv[2], family_of(argv[3]));
    if (argc >= 3 && strcmp(argv[1], "gethostbyname") == 0) {
        struct hostent* h = gethostbyname(argv[2]);
        if (h == NULL) {
            printf("herrno %d\n", h_errno);
            return 1;
        }
        print_hostent(h);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "byaddr") == 0) return byaddr(argv[2]);
    if (argc >= 6 && strcmp(argv[1], "stress") == 0) {
        return stress(atof(argv[2]), atoi(argv[3]), argv[4], atoi(argv[5]));
    }
    fprintf(stderr, "usage: see the comment at the top of nscd_client.c\n");
    return 2;
}
