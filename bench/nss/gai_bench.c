// SPDX-License-Identifier: BSD-3-Clause
/* gai_bench: how many name lookups (or resolve-per-request web requests) a second a program
 * gets through glibc, with whatever /etc/nsswitch.conf, /etc/resolv.conf and /etc/hosts (and
 * nscd, or an NSS module) are in effect.
 *
 *   gai_bench --mode MODE (--name NAME | --names FILE) [--threads N] [--seconds S]
 *             [--max-calls N] [--port 8080] [--path /index.html]
 *
 * MODE:
 *   gai     getaddrinfo(name, NULL, {AF_UNSPEC, SOCK_STREAM}): A and AAAA, as most programs ask
 *   gai4    getaddrinfo(name, NULL, {AF_INET, SOCK_STREAM})
 *   ghbn    gethostbyname_r(name) (the thread-safe gethostbyname; same NSS path, AF_INET)
 *   web     per request, as webbench does: getaddrinfo(name, port, {AF_UNSPEC, SOCK_STREAM}),
 *           connect to the first address, send "GET PATH HTTP/1.0", read the answer to EOF
 *           (it must start "HTTP/1.x 200"), close
 *   webip   the same with NAME a literal IPv4 address, converted by inet_pton: no resolution
 *
 * Each thread walks the name list round robin, starting at a different offset. A call counts
 * when it completes before the deadline (start + S seconds); calls are then per second of S.
 * A failed call (non-zero return, no address, HTTP error) counts as a failure, and the first
 * failure's message is printed. Bounded: each thread stops at the deadline or after
 * --max-calls calls in all; the process exits (with status 3) if a call is still blocked
 * 60 s after the deadline.
 *
 * Output, one line on stdout:
 *   mode=gai threads=1 seconds=3.000 calls=123456 failures=0 per_s=41152.0 per_min=2469120
 * Exit status: 0, 1 if any call failed, 2 on a bad argument, 3 on the hard time limit.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum mode { M_GAI, M_GAI4, M_GHBN, M_WEB, M_WEBIP };

static enum mode g_mode = M_GAI;
static char** g_names;
static size_t g_nnames;
static int g_threads = 1;
static double g_seconds = 3.0;
static long long g_max_calls = 0; /* 0 = no limit */
static int g_port = 8080;
static const char* g_path = "/index.html";
static int64_t g_deadline_ns;
static atomic_llong g_started;
static atomic_llong g_calls;
static atomic_llong g_failures;
static atomic_int g_first_failure_set;
static char g_first_failure[512];

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(const char* msg) {
    fprintf(
        stderr,
        "error: %s\nusage: gai_bench --mode gai|gai4|ghbn|web|webip (--name NAME | --names FILE) "
        "[--threads N] [--seconds S] [--max-calls N] [--port P] [--path /index.html]\n",
        msg);
    exit(2);
}

static void fail(const char* fmt, const char* name, const char* detail) {
    atomic_fetch_add(&g_failures, 1);
    if (atomic_exchange(&g_first_failure_set, 1) == 0)
        snprintf(g_first_failure, sizeof g_first_failure, fmt, name, detail);
}

static int do_gai(const char* name, int family) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = family;
    hints.ai_socktype = SOCK_STREAM;
    int rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        fail("getaddrinfo(%s): %s", name, gai_strerror(rc));
        return -1;
    }
    if (res == NULL) {
        fail("getaddrinfo(%s): %s", name, "no address");
        return -1;
    }
    freeaddrinfo(res);
    return 0;
}

static int do_ghbn(const char* name) {
    struct hostent he, *result = NULL;
    char buf[8192];
    int herr = 0;
    int rc = gethostbyname_r(name, &he, buf, sizeof buf, &result, &herr);
    if (rc != 0 || result == NULL || result->h_addr_list[0] == NULL) {
        fail("gethostbyname_r(%s): %s", name, rc ? strerror(rc) : hstrerror(herr));
        return -1;
    }
    return 0;
}

static int http_get(const struct sockaddr* sa, socklen_t salen, const char* name) {
    int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        fail("socket for %s: %s", name, strerror(errno));
        return -1;
    }
    struct timeval tv = {5, 0}; /* no call blocks forever */
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (connect(fd, sa, salen) != 0) {
        fail("connect to %s: %s", name, strerror(errno));
        close(fd);
        return -1;
    }
    char req[600];
    int n = snprintf(req, sizeof req,
                     "GET %s HTTP/1.0\r\nHost: %s\r\nUser-Agent: gai_bench\r\n\r\n", g_path, name);
    if (send(fd, req, (size_t)n, MSG_NOSIGNAL) != n) {
        fail("send to %s: %s", name, strerror(errno));
        close(fd);
        return -1;
    }
    char buf[16384];
    size_t got = 0;
    char head[16] = {0};
    for (;;) {
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            fail("recv from %s: %s", name, strerror(errno));
            close(fd);
            return -1;
        }
        if (r == 0) break;
        if (got < sizeof head - 1) {
            size_t take = (size_t)r < sizeof head - 1 - got ? (size_t)r : sizeof head - 1 - got;
            memcpy(head + got, buf, take);
        }
        got += (size_t)r;
    }
    close(fd);
    if (strncmp(head, "HTTP/1.", 7) != 0 || strncmp(head + 9, "200", 3) != 0) {
        fail("GET from %s: bad answer \"%.12s\"", name, head);
        return -1;
    }
    return 0;
}

static int do_web(const char* name) {
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    char port[16];
    snprintf(port, sizeof port, "%d", g_port);
    int rc = getaddrinfo(name, port, &hints, &res);
    if (rc != 0 || res == NULL) {
        fail("getaddrinfo(%s): %s", name, rc ? gai_strerror(rc) : "no address");
        return -1;
    }
    rc = http_get(res->ai_addr, res->ai_addrlen, name);
    freeaddrinfo(res);
    return rc;
}

static int do_webip(const char* ip) {
    struct sockaddr_in sin;
    memset(&sin, 0, sizeof sin);
    sin.sin_family = AF_INET;
    sin.sin_port = htons((uint16_t)g_port);
    if (inet_pton(AF_INET, ip, &sin.sin_addr) != 1) {
        fail("webip: %s is not an IPv4 address%s", ip, "");
        return -1;
    }
    return http_get((struct sockaddr*)&sin, sizeof sin, ip);
}

static void* worker(void* arg) {
    size_t i = (size_t)(uintptr_t)arg;
    for (;;) {
        if (g_max_calls && atomic_fetch_add(&g_started, 1) >= g_max_calls) break;
        if (now_ns() >= g_deadline_ns) break;
        const char* name = g_names[i % g_nnames];
        ++i;
        switch (g_mode) {
            case M_GAI:
                do_gai(name, AF_UNSPEC);
                break;
            case M_GAI4:
                do_gai(name, AF_INET);
                break;
            case M_GHBN:
                do_ghbn(name);
                break;
            case M_WEB:
                do_web(name);
                break;
            case M_WEBIP:
                do_webip(name);
                break;
        }
        if (now_ns() > g_deadline_ns) break; /* finished after the deadline: not counted */
        atomic_fetch_add(&g_calls, 1);
    }
    return NULL;
}

static void load_names(const char* path) {
    FILE* f = fopen(path, "r");
    if (!f) usage("cannot read --names file");
    size_t cap = 1024;
    g_names = malloc(cap * sizeof *g_names);
    char line[1100];
    while (fgets(line, sizeof line, f) && g_nnames < 10000000) {
        char* p = strtok(line, " \t\r\n");
        if (!p || p[0] == '#') continue;
        if (g_nnames == cap) g_names = realloc(g_names, (cap *= 2) * sizeof *g_names);
        g_names[g_nnames++] = strdup(p);
    }
    fclose(f);
    if (g_nnames == 0) usage("no names in the --names file");
}

int main(int argc, char** argv) {
    const char* name = NULL;
    const char* names = NULL;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        if (i + 1 >= argc) usage("missing value");
        const char* v = argv[++i];
        if (!strcmp(a, "--mode")) {
            if (!strcmp(v, "gai"))
                g_mode = M_GAI;
            else if (!strcmp(v, "gai4"))
                g_mode = M_GAI4;
            else if (!strcmp(v, "ghbn"))
                g_mode = M_GHBN;
            else if (!strcmp(v, "web"))
                g_mode = M_WEB;
            else if (!strcmp(v, "webip"))
                g_mode = M_WEBIP;
            else
                usage("unknown --mode");
        } else if (!strcmp(a, "--name"))
            name = v;
        else if (!strcmp(a, "--names"))
            names = v;
        else if (!strcmp(a, "--threads"))
            g_threads = atoi(v);
        else if (!strcmp(a, "--seconds"))
            g_seconds = atof(v);
        else if (!strcmp(a, "--max-calls"))
            g_max_calls = atoll(v);
        else if (!strcmp(a, "--port"))
            g_port = atoi(v);
        else if (!strcmp(a, "--path"))
            g_path = v;
        else
            usage("unknown argument");
    }
    if (g_threads < 1 || g_threads > 256) usage("--threads must be 1..256");
    if (!(g_seconds > 0 && g_seconds <= 3600)) usage("--seconds must be in (0, 3600]");
    if (g_max_calls < 0) usage("--max-calls must be >= 0");
    if (g_port < 1 || g_port > 65535) usage("--port must be 1..65535");
    if (strlen(g_path) > 200 || g_path[0] != '/')
        usage("--path must start with / (200 characters at most)");
    if (!!name == !!names) usage("give one of --name and --names");
    if (name) {
        if (strlen(name) > 253) usage("--name too long");
        g_names = malloc(sizeof *g_names);
        g_names[0] = strdup(name);
        g_nnames = 1;
    } else {
        load_names(names);
    }

    pthread_t* th = calloc((size_t)g_threads, sizeof *th);
    int64_t start = now_ns();
    g_deadline_ns = start + (int64_t)(g_seconds * 1e9);
    for (int t = 0; t < g_threads; ++t) {
        size_t offset = g_nnames * (size_t)t / (size_t)g_threads;
        if (pthread_create(&th[t], NULL, worker, (void*)(uintptr_t)offset) != 0) {
            perror("pthread_create");
            return 2;
        }
    }
    /* bounded wait: a lookup stuck on a dead server must not hang the benchmark */
    int64_t hard = g_deadline_ns + 60LL * 1000000000;
    for (int t = 0; t < g_threads; ++t) {
        for (;;) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 100000000;
            if (ts.tv_nsec >= 1000000000) {
                ts.tv_sec += 1;
                ts.tv_nsec -= 1000000000;
            }
            if (pthread_timedjoin_np(th[t], NULL, &ts) == 0) break;
            if (now_ns() > hard) {
                fprintf(stderr, "gai_bench: a call was still blocked 60 s after the deadline\n");
                fflush(stdout);
                _exit(3);
            }
        }
    }
    int64_t end = now_ns();
    /* with --max-calls the run may end before the deadline: rate over the time it took */
    double secs = (end < g_deadline_ns ? (double)(end - start) : g_seconds * 1e9) / 1e9;
    long long calls = atomic_load(&g_calls), failures = atomic_load(&g_failures);
    static const char* names_of[] = {"gai", "gai4", "ghbn", "web", "webip"};
    printf("mode=%s threads=%d seconds=%.3f calls=%lld failures=%lld per_s=%.1f per_min=%.0f\n",
           names_of[g_mode], g_threads, secs, calls, failures, calls / secs, calls / secs * 60);
    if (failures) fprintf(stderr, "first failure: %s\n", g_first_failure);
    fflush(stdout);
    return failures ? 1 : 0;
}
