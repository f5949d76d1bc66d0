// SPDX-License-Identifier: BSD-3-Clause
/* Stress test of the NSS module against the real daemon: P processes x T threads resolve
 * generated names through glibc (getaddrinfo for AF_UNSPEC, AF_INET, AF_INET6, and
 * gethostbyname_r) while the daemon inserts, evicts, expires and flushes. Every answer is
 * checked against the zone's truth:
 *   bulkN.example.test  A 198.18.(N/250).(N%250+1), and AAAA 2001:db8:ff::N+1 for even N only
 *   nxN.example.test    does not exist
 * A wrong or partial answer is a failure; EAI_AGAIN (daemon or upstream busy) is counted, not
 * failed. Run with nsswitch.conf `hosts: nscache`, so no other module can mask an error.
 *
 *   nss_stress NAMES SECONDS PROCS THREADS
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct counts {
    long ok, again, wrong, nodata;
};

static int g_names;
static double g_end;
static struct counts* g_shared; /* one per process, in shared memory */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void truth4(int n, struct in_addr* a) {
    char text[32];
    snprintf(text, sizeof text, "198.18.%d.%d", n / 250, n % 250 + 1);
    inet_pton(AF_INET, text, a);
}

static void truth6(int n, struct in6_addr* a) {
    char text[64];
    snprintf(text, sizeof text, "2001:db8:ff::%x", n + 1);
    inet_pton(AF_INET6, text, a);
}

static void wrong(struct counts* c, const char* what, const char* name, int family) {
    if (c->wrong++ < 5) fprintf(stderr, "WRONG: %s for %s (family %d)\n", what, name, family);
}

/* Checks one getaddrinfo answer for bulk name n against the truth. */
static void check_gai(struct counts* c, const char* name, int n, int family) {
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    struct addrinfo* res = NULL;
    const int rc = getaddrinfo(name, NULL, &hints, &res);
    const int has6 = n >= 0 && n % 2 == 0;
    if (n < 0) { /* nx name */
        if (rc == EAI_NONAME)
            ++c->ok;
        else if (rc == EAI_AGAIN)
            ++c->again;
        else
            wrong(c, rc == 0 ? "an address for a missing name" : gai_strerror(rc), name, family);
        if (rc == 0) freeaddrinfo(res);
        return;
    }
    if (rc == EAI_AGAIN) {
        ++c->again;
        return;
    }
    if (family == AF_INET6 && !has6) {
        if (rc == EAI_NODATA || rc == EAI_NONAME)
            ++c->nodata;
        else
            wrong(c, rc == 0 ? "an IPv6 address for an IPv4-only name" : gai_strerror(rc), name,
                  family);
        if (rc == 0) freeaddrinfo(res);
        return;
    }
    if (rc != 0) {
        wrong(c, gai_strerror(rc), name, family);
        return;
    }
    int seen4 = 0, seen6 = 0, bad = 0;
    struct in_addr w4;
    struct in6_addr w6;
    truth4(n, &w4);
    truth6(n, &w6);
    for (struct addrinfo* r = res; r != NULL; r = r->ai_next) {
        if (r->ai_family == AF_INET) {
            seen4++;
            bad |= memcmp(&((struct sockaddr_in*)r->ai_addr)->sin_addr, &w4, 4) != 0;
        } else if (r->ai_family == AF_INET6) {
            seen6++;
            bad |= memcmp(&((struct sockaddr_in6*)r->ai_addr)->sin6_addr, &w6, 16) != 0;
        } else {
            bad = 1;
        }
    }
    freeaddrinfo(res);
    const int want4 = family != AF_INET6, want6 = family != AF_INET && has6;
    if (bad || seen4 != want4 || seen6 != want6) {
        wrong(c, "addresses differ from the zone", name, family);
        return;
    }
    ++c->ok;
}

static void check_gethostbyname(struct counts* c, const char* name, int n) {
    char buf[2048];
    struct hostent h, *hp = NULL;
    int herr = 0;
    gethostbyname_r(name, &h, buf, sizeof buf, &hp, &herr);
    if (hp == NULL) {
        if (herr == TRY_AGAIN)
            ++c->again;
        else if (n < 0 && herr == HOST_NOT_FOUND)
            ++c->ok;
        else
            wrong(c, "gethostbyname_r failed", name, AF_INET);
        return;
    }
    if (n < 0) {
        wrong(c, "gethostbyname_r found a missing name", name, AF_INET);
        return;
    }
    struct in_addr w4;
    truth4(n, &w4);
    if (h.h_addrtype != AF_INET || h.h_length != 4 || h.h_addr_list[0] == NULL ||
        h.h_addr_list[1] != NULL || memcmp(h.h_addr_list[0], &w4, 4) != 0) {
        wrong(c, "gethostbyname_r addresses differ from the zone", name, AF_INET);
        return;
    }
    ++c->ok;
}

static void* worker(void* arg) {
    struct counts* c = arg;
    unsigned seed = (unsigned)(uintptr_t)arg ^ (unsigned)getpid() ^ (unsigned)time(NULL);
    char name[64];
    while (now_s() < g_end) {
        const int r = (int)(rand_r(&seed) % 100);
        int n = (int)(rand_r(&seed) % (unsigned)g_names);
        if (r < 10) {
            snprintf(name, sizeof name, "nx%d.example.test", n);
            n = -1;
        } else {
            snprintf(name, sizeof name, "bulk%d.example.test", n);
        }
        const int kind = (int)(rand_r(&seed) % 4);
        if (kind == 3)
            check_gethostbyname(c, name, n);
        else
            check_gai(c, name, n, kind == 0 ? AF_UNSPEC : kind == 1 ? AF_INET : AF_INET6);
    }
    return NULL;
}

static void run_process(int index, int threads) {
    pthread_t tid[32];
    struct counts local[32];
    memset(local, 0, sizeof local);
    for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, worker, &local[t]);
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        g_shared[index].ok += local[t].ok;
        g_shared[index].again += local[t].again;
        g_shared[index].wrong += local[t].wrong;
        g_shared[index].nodata += local[t].nodata;
    }
}

int main(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s NAMES SECONDS PROCS THREADS\n", argv[0]);
        return 64;
    }
    g_names = atoi(argv[1]);
    const int seconds = atoi(argv[2]);
    int procs = atoi(argv[3]), threads = atoi(argv[4]);
    if (procs < 1 || procs > 16) procs = 2;
    if (threads < 1 || threads > 32) threads = 2;
    alarm((unsigned)seconds + 60);
    g_end = now_s() + seconds;
    g_shared = mmap(NULL, sizeof(struct counts) * 16, PROT_READ | PROT_WRITE,
                    MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    memset(g_shared, 0, sizeof(struct counts) * 16);
    pid_t kids[16];
    for (int p = 1; p < procs; ++p) {
        kids[p] = fork();
        if (kids[p] == 0) {
            run_process(p, threads);
            _exit(0);
        }
    }
    run_process(0, threads);
    struct counts total = {0, 0, 0, 0};
    for (int p = 0; p < procs; ++p) {
        if (p > 0) waitpid(kids[p], NULL, 0);
        total.ok += g_shared[p].ok;
        total.again += g_shared[p].again;
        total.wrong += g_shared[p].wrong;
        total.nodata += g_shared[p].nodata;
    }
    printf("ok %ld nodata %ld again %ld wrong %ld\n", total.ok, total.nodata, total.again,
           total.wrong);
    return total.wrong == 0 && total.ok > 0 ? 0 : 1;
}
