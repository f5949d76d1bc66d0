// SPDX-License-Identifier: BSD-3-Clause
/* glibc's passwd, group, initgroups and services calls, for the nscd front's user-database
 * tests (tests/integration/nscd/test_nscd_users.py): whatever answers them (nscache through
 * glibc's built-in nscd client, or NSS straight with no daemon) is printed one canonical line
 * per answer, so the tests compare the two outputs as strings.
 *
 *   user_client pwnam NAME          getpwnam_r
 *   user_client pwuid UID           getpwuid_r
 *   user_client grnam NAME          getgrnam_r (every member)
 *   user_client grgid GID           getgrgid_r
 *   user_client grouplist NAME GID  getgrouplist (INITGROUPS): "groups G..." sorted
 *   user_client servname NAME PROTO|-   getservbyname_r ("-": no protocol)
 *   user_client servport PORT PROTO|-   getservbyport_r, PORT in host order (htons'd here, as
 *                                       callers do)
 *   user_client warm CMD ARGS... [, CMD ARGS...]...
 *                                   the lookups in order, then again with write(2)s of "--"
 *                                   around the second round (a trace shows what warm calls
 *                                   cost; several in one process share glibc's back-off flags)
 *   user_client repeat N CMD ARGS...  CMD N times, printing only the distinct outcomes' count
 *                                     of "notfound"/"error"/"ok" lines: "ok A notfound B error C"
 *
 * Lines: "passwd name:passwd:uid:gid:gecos:dir:shell", "group name:passwd:gid:m1,m2",
 * "service name port/proto alias...", "notfound" (the _r call returned 0 with no result) or
 * "error E" (it returned E, an errno value). The exit status is 0 for a found entry, 2 for
 * notfound, 3 for an error.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

enum { FOUND = 0, NOTFOUND = 2, FAILED = 3 };

// Big enough for any group of the tests at once (no ERANGE retry loop to get wrong).
static char buffer[1 << 20];

static int outcome(int rc, const void* result, int print) {
    if (rc != 0) {
        if (print) printf("error %d\n", rc);
        return FAILED;
    }
    if (result == NULL) {
        if (print) printf("notfound\n");
        return NOTFOUND;
    }
    return FOUND;
}

static void print_passwd(const struct passwd* p) {
    printf("passwd %s:%s:%u:%u:%s:%s:%s\n", p->pw_name, p->pw_passwd, (unsigned)p->pw_uid,
           (unsigned)p->pw_gid, p->pw_gecos, p->pw_dir, p->pw_shell);
}

static void print_group(const struct group* g) {
    printf("group %s:%s:%u:", g->gr_name, g->gr_passwd, (unsigned)g->gr_gid);
    for (char** m = g->gr_mem; *m != NULL; ++m) printf("%s%s", m == g->gr_mem ? "" : ",", *m);
    printf("\n");
}

static void print_service(const struct servent* s) {
    printf("service %s %d/%s", s->s_name, ntohs((uint16_t)s->s_port), s->s_proto);
    for (char** a = s->s_aliases; *a != NULL; ++a) printf(" %s", *a);
    printf("\n");
}

static int cmp_gid(const void* a, const void* b) {
    const gid_t x = *(const gid_t*)a, y = *(const gid_t*)b;
    return x < y ? -1 : x > y;
}

static int lookup(int argc, char** argv, int print) {
    if (argc < 2) return -1;
    const char* cmd = argv[0];
    const char* key = argv[1];
    errno = 0;
    if (strcmp(cmd, "pwnam") == 0 || strcmp(cmd, "pwuid") == 0) {
        struct passwd pw, *res = NULL;
        const int rc = cmd[2] == 'n' ? getpwnam_r(key, &pw, buffer, sizeof buffer, &res)
                                     : getpwuid_r((uid_t)strtoul(key, NULL, 10), &pw, buffer,
                                                  sizeof buffer, &res);
        const int o = outcome(rc, res, print);
        if (o == FOUND && print) print_passwd(res);
        return o;
    }
    if (strcmp(cmd, "grnam") == 0 || strcmp(cmd, "grgid") == 0) {
        struct group gr, *res = NULL;
        const int rc = cmd[2] == 'n' ? getgrnam_r(key, &gr, buffer, sizeof buffer, &res)
                                     : getgrgid_r((gid_t)strtoul(key, NULL, 10), &gr, buffer,
                                                  sizeof buffer, &res);
        const int o = outcome(rc, res, print);
        if (o == FOUND && print) print_group(res);
        return o;
    }
    if (strcmp(cmd, "grouplist") == 0) {
        if (argc < 3) return -1;
        static gid_t groups[4096];
        int n = (int)(sizeof groups / sizeof groups[0]);
        if (getgrouplist(key, (gid_t)strtoul(argv[2], NULL, 10), groups, &n) < 0) {
            if (print) printf("error toomany %d\n", n);
            return FAILED;
        }
        qsort(groups, (size_t)n, sizeof groups[0], cmp_gid);
        if (print) {
            printf("groups");
            for (int i = 0; i < n; ++i) printf(" %u", (unsigned)groups[i]);
            printf("\n");
        }
        return FOUND;
    }
    if (strcmp(cmd, "servname") == 0 || strcmp(cmd, "servport") == 0) {
        if (argc < 3) return -1;
        const char* proto = strcmp(argv[2], "-") == 0 ? NULL : argv[2];
        struct servent se, *res = NULL;
        const int rc = cmd[4] == 'n' ? getservbyname_r(key, proto, &se, buffer, sizeof buffer, &res)
                                     : getservbyport_r(htons((uint16_t)strtoul(key, NULL, 10)),
                                                       proto, &se, buffer, sizeof buffer, &res);
        const int o = outcome(rc, res, print);
        if (o == FOUND && print) print_service(res);
        return o;
    }
    return -1;
}

// The lookups of argv separated by "," one after the other: the last one's outcome, or -1.
static int lookups(int argc, char** argv) {
    int o = -1;
    for (int i = 0; i < argc;) {
        int n = 0;
        while (i + n < argc && strcmp(argv[i + n], ",") != 0) ++n;
        if ((o = lookup(n, argv + i, 1)) < 0) return -1;
        i += n + 1;
    }
    return o;
}

static int usage(void) {
    fprintf(stderr,
            "usage: user_client pwnam|pwuid|grnam|grgid KEY | grouplist NAME GID |\n"
            "       servname|servport KEY PROTO|- | warm CMD ARGS... | repeat N CMD ARGS...\n");
    return 64;
}

int main(int argc, char** argv) {
    if (argc < 2) return usage();
    if (strcmp(argv[1], "warm") == 0) {
        if (lookups(argc - 2, argv + 2) < 0) return usage();
        fflush(stdout);
        if (write(1, "--\n", 3) != 3) return 1;
        const int o = lookups(argc - 2, argv + 2);
        fflush(stdout);
        if (write(1, "--\n", 3) != 3) return 1;
        return o;
    }
    if (strcmp(argv[1], "repeat") == 0) {
        if (argc < 4) return usage();
        const long n = strtol(argv[2], NULL, 10);
        long counts[4] = {0, 0, 0, 0};
        for (long i = 0; i < n; ++i) {
            const int o = lookup(argc - 3, argv + 3, 0);
            if (o < 0) return usage();
            ++counts[o];
        }
        printf("ok %ld notfound %ld error %ld\n", counts[FOUND], counts[NOTFOUND], counts[FAILED]);
        return 0;
    }
    const int o = lookup(argc - 1, argv + 1, 1);
    return o < 0 ? usage() : o;
}
