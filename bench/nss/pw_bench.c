// SPDX-License-Identifier: BSD-3-Clause
/* pw_bench: how many user-database lookups a second a program gets through glibc (its nscd
 * client and map first, then nsswitch.conf), and how long after an edit of /etc/passwd a new
 * user becomes visible.
 *
 *   pw_bench --mode MODE --keys FILE [--threads N] [--seconds S] [--max-calls N]
 *   pw_bench --wait-for NAME [--negative-first] [--interval-ms 10] [--timeout-s 30]
 *
 * MODE and the key lines it reads (one key a line):
 *   pwnam       getpwnam_r(NAME)                 NAME
 *   pwuid       getpwuid_r(UID)                  UID
 *   grnam       getgrnam_r(NAME)                 NAME
 *   grouplist   getgrouplist(USER, GID)          USER:GID (GID: the user's primary group)
 *   servbyname  getservbyname_r(NAME, PROTO)     NAME/PROTO
 *
 * Each thread walks the keys round robin from its own offset; a call counts when it completes
 * before the deadline, and "not found" counts as a failure (every key exists). Bounded: each
 * thread stops at the deadline or after --max-calls calls in all; SIGALRM ends the process if a
 * call is still blocked 60 s after the deadline. Output, one line on stdout:
 *   mode=pwnam threads=1 seconds=2.000 calls=123456 failures=0 per_s=61728.0
 *
 * --wait-for: looks up "root" (so the client holds the map), then NAME once if --negative-first
 * (it must not exist yet), prints "ready", waits for a line on stdin (the caller edits
 * /etc/passwd first), then calls getpwnam_r(NAME) every --interval-ms until it is found or
 * --timeout-s passed, and prints "visible_ns=T polls=N" (T: CLOCK_MONOTONIC at the successful
 * call's return, the clock Python's time.monotonic_ns() reads) or "not_visible polls=N".
 * Exit status: 0, 1 if any call failed (or NAME existed too early), 2 on a bad argument,
 * 4 if NAME did not become visible; killed by SIGALRM past the hard time limit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <pthread.h>
#include <pwd.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum mode { M_PWNAM, M_PWUID, M_GRNAM, M_GROUPLIST, M_SERVBYNAME };
static const char* const MODE_NAMES[] = {"pwnam", "pwuid", "grnam", "grouplist", "servbyname"};

struct key {
    char* a;      // name, user, service name
    char* b;      // service protocol (NULL: any)
    long number;  // uid or primary gid
};

static enum mode g_mode = M_PWNAM;
static struct key* g_keys;
static size_t g_nkeys;
static int g_threads = 1;
static double g_seconds = 2.0;
static long long g_max_calls = 0;
static int64_t g_deadline_ns;
static atomic_llong g_started;
static atomic_llong g_calls;
static atomic_llong g_failures;
static atomic_int g_first_failure_set;
static char g_first_failure[256];

// Big enough for a group of thousands of members; ERANGE counts as a failure.
enum { BUFFER_SIZE = 1 << 20, MAX_GROUPS = 4096 };

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void usage(const char* msg) {
    fprintf(
        stderr,
        "error: %s\nusage: pw_bench --mode pwnam|pwuid|grnam|grouplist|servbyname --keys FILE "
        "[--threads N] [--seconds S] [--max-calls N]\n"
        "       pw_bench --wait-for NAME [--negative-first] [--interval-ms MS] [--timeout-s S]\n",
        msg);
    exit(2);
}

static void fail(const struct key* k, const char* what) {
    atomic_fetch_add(&g_failures, 1);
    if (atomic_exchange(&g_first_failure_set, 1) == 0)
        snprintf(g_first_failure, sizeof g_first_failure, "%s %s%s%s: %s", MODE_NAMES[g_mode], k->a,
                 k->b ? "/" : "", k->b ? k->b : "", what);
}

static const char* err_text(int rc) {
    return rc == 0 ? "not found" : strerror(rc);
}

static void lookup(const struct key* k, char* buf) {
    int rc;
    switch (g_mode) {
        case M_PWNAM:
        case M_PWUID: {
            struct passwd pw, *res = NULL;
            rc = g_mode == M_PWNAM ? getpwnam_r(k->a, &pw, buf, BUFFER_SIZE, &res)
                                   : getpwuid_r((uid_t)k->number, &pw, buf, BUFFER_SIZE, &res);
            if (res == NULL) fail(k, err_text(rc));
            break;
        }
        case M_GRNAM: {
            struct group gr, *res = NULL;
            rc = getgrnam_r(k->a, &gr, buf, BUFFER_SIZE, &res);
            if (res == NULL) fail(k, err_text(rc));
            break;
        }
        case M_GROUPLIST: {
            gid_t* groups = (gid_t*)buf;
            int n = MAX_GROUPS;
            // at least the primary group comes back; -1 only when MAX_GROUPS is too small
            if (getgrouplist(k->a, (gid_t)k->number, groups, &n) < 0 || n < 1)
                fail(k, "getgrouplist failed");
            break;
        }
        case M_SERVBYNAME: {
            struct servent se, *res = NULL;
            rc = getservbyname_r(k->a, k->b, &se, buf, BUFFER_SIZE, &res);
            if (res == NULL) fail(k, err_text(rc));
            break;
        }
    }
}

static void* worker(void* arg) {
    size_t i = (size_t)(uintptr_t)arg % g_nkeys;
    char* buf = malloc(BUFFER_SIZE);
    if (buf == NULL) return NULL;
    for (;;) {
        if (now_ns() >= g_deadline_ns) break;
        if (g_max_calls > 0 && atomic_fetch_add(&g_started, 1) >= g_max_calls) break;
        lookup(&g_keys[i], buf);
        if (now_ns() <= g_deadline_ns) atomic_fetch_add(&g_calls, 1);
        i = (i + 1) % g_nkeys;
    }
    free(buf);
    return NULL;
}

static void parse_key(char* line, struct key* k) {
    k->a = line;
    k->b = NULL;
    k->number = 0;
    char* sep = NULL;
    if (g_mode == M_GROUPLIST)
        sep = strchr(line, ':');
    else if (g_mode == M_SERVBYNAME)
        sep = strchr(line, '/');
    if (sep != NULL) {
        *sep = '\0';
        k->b = sep + 1;
    }
    if (g_mode == M_PWUID || g_mode == M_GROUPLIST) {
        const char* digits = g_mode == M_PWUID ? k->a : k->b;
        char* end = NULL;
        if (digits == NULL || *digits == '\0') usage("a key lacks its number");
        k->number = strtol(digits, &end, 10);
        if (*end != '\0' || k->number < 0) usage("a key's number is not a non-negative integer");
    }
}

static void read_keys(const char* path) {
    FILE* f = fopen(path, "r");
    if (f == NULL) usage("cannot open the keys file");
    size_t cap = 0;
    char* line = NULL;
    size_t len = 0;
    ssize_t n;
    while ((n = getline(&line, &len, f)) > 0) {
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = '\0';
        if (n == 0) continue;
        if (g_nkeys == cap) {
            cap = cap ? cap * 2 : 256;
            g_keys = realloc(g_keys, cap * sizeof *g_keys);
            if (g_keys == NULL) usage("out of memory");
        }
        parse_key(strdup(line), &g_keys[g_nkeys++]);
    }
    free(line);
    fclose(f);
    if (g_nkeys == 0) usage("the keys file is empty");
}

static int found_user(const char* name) {
    static char buf[BUFFER_SIZE];
    struct passwd pw, *res = NULL;
    getpwnam_r(name, &pw, buf, sizeof buf, &res);
    return res != NULL;
}

static int wait_for(const char* name, int negative_first, long interval_ms, double timeout_s) {
    if (!found_user("root")) fprintf(stderr, "warning: root not found\n");
    if (negative_first && found_user(name)) {
        fprintf(stderr, "%s exists before the edit\n", name);
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    char go[64];
    if (fgets(go, sizeof go, stdin) == NULL) return 2;
    const int64_t end = now_ns() + (int64_t)(timeout_s * 1e9);
    long polls = 0;
    for (;;) {
        ++polls;
        if (found_user(name)) {
            printf("visible_ns=%lld polls=%ld\n", (long long)now_ns(), polls);
            return 0;
        }
        if (now_ns() >= end) break;
        struct timespec ts = {interval_ms / 1000, (interval_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    printf("not_visible polls=%ld\n", polls);
    return 4;
}

int main(int argc, char** argv) {
    const char* keys = NULL;
    const char* wait_name = NULL;
    int negative_first = 0, have_mode = 0;
    long interval_ms = 10;
    double timeout_s = 30;
    for (int i = 1; i < argc; ++i) {
        const char* a = argv[i];
        const char* v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--negative-first") == 0) {
            negative_first = 1;
            continue;
        }
        if (v == NULL) usage("an option lacks its value");
        ++i;
        if (strcmp(a, "--mode") == 0) {
            size_t m = 0;
            while (m < sizeof MODE_NAMES / sizeof *MODE_NAMES && strcmp(v, MODE_NAMES[m]) != 0) ++m;
            if (m == sizeof MODE_NAMES / sizeof *MODE_NAMES) usage("unknown mode");
            g_mode = (enum mode)m;
            have_mode = 1;
        } else if (strcmp(a, "--keys") == 0) {
            keys = v;
        } else if (strcmp(a, "--threads") == 0) {
            g_threads = atoi(v);
        } else if (strcmp(a, "--seconds") == 0) {
            g_seconds = atof(v);
        } else if (strcmp(a, "--max-calls") == 0) {
            g_max_calls = atoll(v);
        } else if (strcmp(a, "--wait-for") == 0) {
            wait_name = v;
        } else if (strcmp(a, "--interval-ms") == 0) {
            interval_ms = atol(v);
        } else if (strcmp(a, "--timeout-s") == 0) {
            timeout_s = atof(v);
        } else {
            usage("unknown option");
        }
    }
    if (wait_name != NULL) {
        if (interval_ms < 1 || interval_ms > 10000 || !(timeout_s > 0 && timeout_s <= 600))
            usage("--interval-ms must be 1..10000 and --timeout-s 0..600");
        alarm((unsigned)timeout_s + 60);
        return wait_for(wait_name, negative_first, interval_ms, timeout_s);
    }
    if (!have_mode || keys == NULL) usage("--mode and --keys are required");
    if (g_threads < 1 || g_threads > 64 || !(g_seconds > 0 && g_seconds <= 600) || g_max_calls < 0)
        usage("--threads must be 1..64, --seconds 0..600, --max-calls >= 0");
    read_keys(keys);
    alarm((unsigned)g_seconds + 60);
    const int64_t start = now_ns();
    g_deadline_ns = start + (int64_t)(g_seconds * 1e9);
    pthread_t tids[64];
    for (int t = 0; t < g_threads; ++t)
        if (pthread_create(&tids[t], NULL, worker,
                           (void*)(uintptr_t)(t * (g_nkeys / g_threads + 1))) != 0)
            usage("pthread_create failed");
    for (int t = 0; t < g_threads; ++t) pthread_join(tids[t], NULL);
    const double elapsed = g_max_calls > 0 ? (double)(now_ns() - start) / 1e9 : g_seconds;
    const long long calls = atomic_load(&g_calls), failures = atomic_load(&g_failures);
    printf("mode=%s threads=%d seconds=%.3f calls=%lld failures=%lld per_s=%.1f\n",
           MODE_NAMES[g_mode], g_threads, elapsed, calls, failures,
           calls / (elapsed > 0 ? elapsed : 1));
    if (failures > 0) fprintf(stderr, "first failure: %s\n", g_first_failure);
    return failures > 0 ? 1 : 0;
}
