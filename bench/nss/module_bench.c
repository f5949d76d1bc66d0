// SPDX-License-Identifier: BSD-3-Clause
/* The NSS module's own cost per lookup, without glibc's NSS dispatch around it: dlopen
 * libnss_nscache.so.2 and call its gethostbyname4_r / gethostbyname2_r entry points in a loop
 * for a few seconds. On a map hit this is the figure to set beside nscd's shared-map cost;
 * getaddrinfo adds glibc's own work (nsswitch.conf and resolv.conf change checks) on top.
 *
 *   module_bench MODULE.so NAME [SECONDS]
 *   -> gethostbyname4_r: calls=... ns_per_call=... status=...
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netdb.h>
#include <nss.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef enum nss_status (*gh4_fn)(const char*, struct gaih_addrtuple**, char*, size_t, int*, int*,
                                  int32_t*);
typedef enum nss_status (*gh2_fn)(const char*, int, struct hostent*, char*, size_t, int*, int*);

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char** argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: module_bench MODULE.so NAME [SECONDS]\n");
        return 2;
    }
    const double seconds = argc > 3 ? atof(argv[3]) : 2.0;
    void* module = dlopen(argv[1], RTLD_NOW);
    if (module == NULL) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    gh4_fn gh4 = (gh4_fn)dlsym(module, "_nss_nscache_gethostbyname4_r");
    gh2_fn gh2 = (gh2_fn)dlsym(module, "_nss_nscache_gethostbyname2_r");
    if (gh4 == NULL || gh2 == NULL) {
        fprintf(stderr, "missing entry points\n");
        return 1;
    }
    static char buffer[8192];
    int err = 0, herr = 0;
    int32_t ttl = 0;

    for (int which = 0; which < 2; ++which) {
        long long calls = 0;
        enum nss_status status = NSS_STATUS_SUCCESS;
        const double start = now_s();
        double elapsed = 0;
        do {
            for (int i = 0; i < 1000; ++i) {
                if (which == 0) {
                    struct gaih_addrtuple* pat = NULL;
                    status = gh4(argv[2], &pat, buffer, sizeof buffer, &err, &herr, &ttl);
                } else {
                    struct hostent he;
                    status = gh2(argv[2], AF_INET, &he, buffer, sizeof buffer, &err, &herr);
                }
            }
            calls += 1000;
            elapsed = now_s() - start;
        } while (elapsed < seconds);
        printf("%s: calls=%lld ns_per_call=%.0f status=%d\n",
               which == 0 ? "gethostbyname4_r" : "gethostbyname2_r", calls, elapsed * 1e9 / calls,
               (int)status);
    }
    return 0;
}
