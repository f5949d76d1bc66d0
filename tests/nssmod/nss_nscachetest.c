// SPDX-License-Identifier: BSD-3-Clause
// libnss_nscachetest.so.2: an NSS module for tests only, standing in for a directory (LDAP,
// sssd, systemd's dynamic users) whose answers, delays and failures a test sets. Its entries
// and behaviour come from a text file, $NSCACHETEST_CONF (default /etc/nscachetest.conf),
// read again on every call, so a test edits it while the daemon runs. One directive a line,
// fields split at white space, '#' starts a comment:
//
//   user NAME UID GID [GECOS DIR SHELL]   a passwd entry (defaults: "" "/" "/bin/sh"; passwd "x")
//   group NAME GID [MEMBER,MEMBER...]     a group entry; initgroups_dyn is built from these
//   service NAME PORT PROTO [ALIAS...]    a service entry (PORT in host order, as in /etc/services)
//   delay MS                              every call sleeps MS milliseconds first
//   delay-name KEY MS                     only lookups of KEY sleep (KEY: a name, or a uid, gid
//                                         or port in decimal, as the lookup was asked)
//   tryagain KEY | unavail KEY            lookups of KEY answer
//                                         NSS_STATUS_TRYAGAIN (errno EAGAIN) / UNAVAIL (ENOENT)
//   tryagain-all | unavail-all            every lookup (and enumeration) does
//   count-file PATH                       each call appends "FUNCTION KEY\n" to PATH, so a test
//                                         counts the NSS calls made (e.g. to see coalescing)
//   unload-file PATH                      if the module is unloaded (exit()'s destructors) while
//                                         a call sleeps in it, PATH is written: a real module
//                                         (libldap, OpenSSL) would then run on freed state
//
// A missing configuration file is an empty one (every lookup NOTFOUND). A short buffer is
// NSS_STATUS_TRYAGAIN with *errnop = ERANGE, as glibc's callers expect. Thread-safe: every
// call reads the file itself; the enumeration positions are under one mutex.
#include <arpa/inet.h>
#include <errno.h>
#include <grp.h>
#include <netdb.h>
#include <nss.h>
#include <pthread.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// Built twice: libnss_nscachetest.so.2, and with NSCACHETEST_NO_INITGROUPS
// libnss_nscachetestenum.so.2, which lacks initgroups_dyn so that callers fall back to
// enumerating its groups (setgrent/getgrent_r/endgrent), as they must for such modules.
#ifdef NSCACHETEST_NO_INITGROUPS
#define NSS_FN(name) _nss_nscachetestenum_##name
#else
#define NSS_FN(name) _nss_nscachetest_##name
#endif

#define MAX_FIELDS 64

// One line of the configuration split into fields (pointers into the line).
struct fields {
    char* v[MAX_FIELDS];
    int n;
};

static void split(char* line, struct fields* f) {
    char* hash = strchr(line, '#');
    if (hash) *hash = '\0';
    f->n = 0;
    char* save = NULL;
    for (char* t = strtok_r(line, " \t\r\n", &save); t && f->n < MAX_FIELDS;
         t = strtok_r(NULL, " \t\r\n", &save))
        f->v[f->n++] = t;
}

// The last unload-file named, and the calls sleeping in the module now.
static pthread_mutex_t unload_mu = PTHREAD_MUTEX_INITIALIZER;
static char unload_path[4096];
static int sleeping;

__attribute__((destructor)) static void on_unload(void) {
    pthread_mutex_lock(&unload_mu);
    if (sleeping > 0 && unload_path[0] != '\0') {
        FILE* f = fopen(unload_path, "we");
        if (f) {
            fprintf(f, "unloaded with %d calls in the module\n", sleeping);
            fclose(f);
        }
    }
    pthread_mutex_unlock(&unload_mu);
}

static FILE* open_conf(void) {
    const char* path = getenv("NSCACHETEST_CONF");
    return fopen(path && *path ? path : "/etc/nscachetest.conf", "re");
}

// What the configuration says about a call of `func` for `key` (the name, or the decimal id or
// host-order port asked for): counts it, sleeps, and returns the status to answer with, or
// NSS_STATUS_SUCCESS to go on with the lookup.
static enum nss_status prologue(const char* func, const char* key, int* errnop) {
    FILE* f = open_conf();
    if (!f) return NSS_STATUS_SUCCESS;
    long delay_ms = 0;
    enum nss_status status = NSS_STATUS_SUCCESS;
    char* line = NULL;
    size_t cap = 0;
    while (getline(&line, &cap, f) >= 0) {
        struct fields fl;
        split(line, &fl);
        if (fl.n == 0) continue;
        const char* d = fl.v[0];
        if (strcmp(d, "delay") == 0 && fl.n >= 2) {
            delay_ms += atol(fl.v[1]);
        } else if (strcmp(d, "delay-name") == 0 && fl.n >= 3 && strcmp(fl.v[1], key) == 0) {
            delay_ms += atol(fl.v[2]);
        } else if (strcmp(d, "tryagain-all") == 0 ||
                   (strcmp(d, "tryagain") == 0 && fl.n >= 2 && strcmp(fl.v[1], key) == 0)) {
            status = NSS_STATUS_TRYAGAIN;
        } else if (strcmp(d, "unavail-all") == 0 ||
                   (strcmp(d, "unavail") == 0 && fl.n >= 2 && strcmp(fl.v[1], key) == 0)) {
            if (status == NSS_STATUS_SUCCESS) status = NSS_STATUS_UNAVAIL;
        } else if (strcmp(d, "unload-file") == 0 && fl.n >= 2) {
            pthread_mutex_lock(&unload_mu);
            snprintf(unload_path, sizeof unload_path, "%s", fl.v[1]);
            pthread_mutex_unlock(&unload_mu);
        } else if (strcmp(d, "count-file") == 0 && fl.n >= 2) {
            FILE* c = fopen(fl.v[1], "ae");
            if (c) {
                fprintf(c, "%s %s\n", func, key);
                fclose(c);
            }
        }
    }
    free(line);
    fclose(f);
    if (delay_ms > 0) {
        pthread_mutex_lock(&unload_mu);
        ++sleeping;
        pthread_mutex_unlock(&unload_mu);
        struct timespec ts = {delay_ms / 1000, (delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
        pthread_mutex_lock(&unload_mu);
        --sleeping;
        pthread_mutex_unlock(&unload_mu);
    }
    if (status == NSS_STATUS_TRYAGAIN) *errnop = EAGAIN;
    if (status == NSS_STATUS_UNAVAIL) *errnop = ENOENT;
    return status;
}

// The `index`-th line (0-based) whose directive is `kind` and for which `match` is true;
// its fields in `fl`, which points into *line (the caller frees it). 0 when none.
typedef int (*matcher)(const struct fields* fl, const void* arg);

static int find_entry(const char* kind, matcher match, const void* arg, long index, char** line,
                      struct fields* fl) {
    FILE* f = open_conf();
    if (!f) return 0;
    size_t cap = 0;
    int found = 0;
    while (getline(line, &cap, f) >= 0) {
        split(*line, fl);
        if (fl->n == 0 || strcmp(fl->v[0], kind) != 0) continue;
        if (match && !match(fl, arg)) continue;
        if (index-- > 0) continue;
        found = 1;
        break;
    }
    fclose(f);
    return found;
}

// Hands out space in the caller's buffer; NULL when it is too short.
struct arena {
    char* p;
    size_t left;
};

static char* put(struct arena* a, const char* s) {
    size_t n = strlen(s) + 1;
    if (n > a->left) return NULL;
    char* out = a->p;
    memcpy(out, s, n);
    a->p += n;
    a->left -= n;
    return out;
}

static char** put_array(struct arena* a, size_t count) {
    uintptr_t misalign = (uintptr_t)a->p % sizeof(char*);
    size_t pad = misalign ? sizeof(char*) - misalign : 0;
    size_t need = pad + count * sizeof(char*);
    if (need > a->left) return NULL;
    char** out = (char**)(void*)(a->p + pad);
    a->p += need;
    a->left -= need;
    return out;
}

static enum nss_status erange(int* errnop) {
    *errnop = ERANGE;
    return NSS_STATUS_TRYAGAIN;
}

// ---- passwd

static int user_by_name(const struct fields* fl, const void* arg) {
    return fl->n >= 4 && strcmp(fl->v[1], (const char*)arg) == 0;
}
static int user_by_uid(const struct fields* fl, const void* arg) {
    return fl->n >= 4 && strtoul(fl->v[2], NULL, 10) == *(const uid_t*)arg;
}
static int user_any(const struct fields* fl, const void* arg) {
    (void)arg;
    return fl->n >= 4;
}

static enum nss_status fill_passwd(const struct fields* fl, struct passwd* pw, char* buffer,
                                   size_t buflen, int* errnop) {
    struct arena a = {buffer, buflen};
    pw->pw_name = put(&a, fl->v[1]);
    pw->pw_passwd = put(&a, "x");
    pw->pw_uid = (uid_t)strtoul(fl->v[2], NULL, 10);
    pw->pw_gid = (gid_t)strtoul(fl->v[3], NULL, 10);
    pw->pw_gecos = put(&a, fl->n > 4 ? fl->v[4] : "");
    pw->pw_dir = put(&a, fl->n > 5 ? fl->v[5] : "/");
    pw->pw_shell = put(&a, fl->n > 6 ? fl->v[6] : "/bin/sh");
    if (!pw->pw_name || !pw->pw_passwd || !pw->pw_gecos || !pw->pw_dir || !pw->pw_shell)
        return erange(errnop);
    return NSS_STATUS_SUCCESS;
}

static enum nss_status lookup_passwd(const char* func, const char* key, matcher match,
                                     const void* arg, struct passwd* pw, char* buffer,
                                     size_t buflen, int* errnop) {
    enum nss_status s = prologue(func, key, errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    char* line = NULL;
    struct fields fl;
    if (!find_entry("user", match, arg, 0, &line, &fl)) {
        free(line);
        *errnop = ENOENT;
        return NSS_STATUS_NOTFOUND;
    }
    s = fill_passwd(&fl, pw, buffer, buflen, errnop);
    free(line);
    return s;
}

enum nss_status NSS_FN(getpwnam_r)(const char* name, struct passwd* pw, char* buffer, size_t buflen,
                                   int* errnop) {
    return lookup_passwd("getpwnam_r", name, user_by_name, name, pw, buffer, buflen, errnop);
}

enum nss_status NSS_FN(getpwuid_r)(uid_t uid, struct passwd* pw, char* buffer, size_t buflen,
                                   int* errnop) {
    char key[16];
    snprintf(key, sizeof key, "%u", (unsigned)uid);
    return lookup_passwd("getpwuid_r", key, user_by_uid, &uid, pw, buffer, buflen, errnop);
}

// ---- group

static int group_by_name(const struct fields* fl, const void* arg) {
    return fl->n >= 3 && strcmp(fl->v[1], (const char*)arg) == 0;
}
static int group_by_gid(const struct fields* fl, const void* arg) {
    return fl->n >= 3 && strtoul(fl->v[2], NULL, 10) == *(const gid_t*)arg;
}
static int group_any(const struct fields* fl, const void* arg) {
    (void)arg;
    return fl->n >= 3;
}

static enum nss_status fill_group(const struct fields* fl, struct group* gr, char* buffer,
                                  size_t buflen, int* errnop) {
    struct arena a = {buffer, buflen};
    const char* members = fl->n > 3 ? fl->v[3] : "";
    size_t count = 0;
    for (const char* p = members; *p; ++p) count += *p == ',';
    count += 2;  // the last member and the NULL
    char** mem = put_array(&a, count);
    char* copy = put(&a, members);
    gr->gr_name = put(&a, fl->v[1]);
    gr->gr_passwd = put(&a, "x");
    if (!mem || !copy || !gr->gr_name || !gr->gr_passwd) return erange(errnop);
    gr->gr_gid = (gid_t)strtoul(fl->v[2], NULL, 10);
    size_t n = 0;
    char* save = NULL;
    for (char* t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) mem[n++] = t;
    mem[n] = NULL;
    gr->gr_mem = mem;
    return NSS_STATUS_SUCCESS;
}

static enum nss_status lookup_group(const char* func, const char* key, matcher match,
                                    const void* arg, struct group* gr, char* buffer, size_t buflen,
                                    int* errnop) {
    enum nss_status s = prologue(func, key, errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    char* line = NULL;
    struct fields fl;
    if (!find_entry("group", match, arg, 0, &line, &fl)) {
        free(line);
        *errnop = ENOENT;
        return NSS_STATUS_NOTFOUND;
    }
    s = fill_group(&fl, gr, buffer, buflen, errnop);
    free(line);
    return s;
}

enum nss_status NSS_FN(getgrnam_r)(const char* name, struct group* gr, char* buffer, size_t buflen,
                                   int* errnop) {
    return lookup_group("getgrnam_r", name, group_by_name, name, gr, buffer, buflen, errnop);
}

enum nss_status NSS_FN(getgrgid_r)(gid_t gid, struct group* gr, char* buffer, size_t buflen,
                                   int* errnop) {
    char key[16];
    snprintf(key, sizeof key, "%u", (unsigned)gid);
    return lookup_group("getgrgid_r", key, group_by_gid, &gid, gr, buffer, buflen, errnop);
}

#ifndef NSCACHETEST_NO_INITGROUPS
static int has_member(const char* members, const char* user) {
    size_t n = strlen(user);
    for (const char* p = members; *p;) {
        const char* end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == n && strncmp(p, user, n) == 0) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

// As files' initgroups_dyn: every group listing `user` except `group` (the primary one) is
// appended; SUCCESS when one was, NOTFOUND otherwise.
enum nss_status NSS_FN(initgroups_dyn)(const char* user, gid_t group, long int* start,
                                       long int* size, gid_t** groupsp, long int limit,
                                       int* errnop) {
    enum nss_status s = prologue("initgroups_dyn", user, errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    FILE* f = open_conf();
    if (!f) return NSS_STATUS_NOTFOUND;
    char* line = NULL;
    size_t cap = 0;
    int any = 0;
    while (getline(&line, &cap, f) >= 0) {
        struct fields fl;
        split(line, &fl);
        if (fl.n < 4 || strcmp(fl.v[0], "group") != 0 || !has_member(fl.v[3], user)) continue;
        gid_t gid = (gid_t)strtoul(fl.v[2], NULL, 10);
        if (gid == group) continue;
        if (*start == *size) {
            if (limit > 0 && *size >= limit) break;
            long int grown = *size * 2 + 1;
            if (limit > 0 && grown > limit) grown = limit;
            gid_t* g = realloc(*groupsp, (size_t)grown * sizeof(gid_t));
            if (!g) {
                free(line);
                fclose(f);
                *errnop = ENOMEM;
                return NSS_STATUS_TRYAGAIN;
            }
            *groupsp = g;
            *size = grown;
        }
        (*groupsp)[(*start)++] = gid;
        any = 1;
    }
    free(line);
    fclose(f);
    if (!any) *errnop = ENOENT;
    return any ? NSS_STATUS_SUCCESS : NSS_STATUS_NOTFOUND;
}
#endif

// ---- services

struct service_key {
    const char* name;   // by name (or alias); NULL: by port
    int port;           // host order
    const char* proto;  // NULL: any
};

static int service_match(const struct fields* fl, const void* arg) {
    const struct service_key* k = arg;
    if (fl->n < 4) return 0;
    if (k->proto && strcmp(fl->v[3], k->proto) != 0) return 0;
    if (!k->name) return atoi(fl->v[2]) == k->port;
    for (int i = 1; i < fl->n; ++i)
        if ((i == 1 || i >= 4) && strcmp(fl->v[i], k->name) == 0) return 1;
    return 0;
}

static enum nss_status lookup_service(const char* func, const char* key,
                                      const struct service_key* k, struct servent* se, char* buffer,
                                      size_t buflen, int* errnop) {
    enum nss_status s = prologue(func, key, errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    char* line = NULL;
    struct fields fl;
    if (!find_entry("service", service_match, k, 0, &line, &fl)) {
        free(line);
        *errnop = ENOENT;
        return NSS_STATUS_NOTFOUND;
    }
    struct arena a = {buffer, buflen};
    char** aliases = put_array(&a, (size_t)(fl.n - 4 + 1));
    se->s_name = put(&a, fl.v[1]);
    se->s_proto = put(&a, fl.v[3]);
    s = NSS_STATUS_SUCCESS;
    if (!aliases || !se->s_name || !se->s_proto) s = erange(errnop);
    for (int i = 4; s == NSS_STATUS_SUCCESS && i < fl.n; ++i)
        if (!(aliases[i - 4] = put(&a, fl.v[i]))) s = erange(errnop);
    if (s == NSS_STATUS_SUCCESS) {
        aliases[fl.n - 4] = NULL;
        se->s_aliases = aliases;
        se->s_port = (int)htons((uint16_t)atoi(fl.v[2]));
    }
    free(line);
    return s;
}

enum nss_status NSS_FN(getservbyname_r)(const char* name, const char* proto, struct servent* se,
                                        char* buffer, size_t buflen, int* errnop) {
    struct service_key k = {name, 0, proto};
    return lookup_service("getservbyname_r", name, &k, se, buffer, buflen, errnop);
}

enum nss_status NSS_FN(getservbyport_r)(int port, const char* proto, struct servent* se,
                                        char* buffer, size_t buflen, int* errnop) {
    struct service_key k = {NULL, ntohs((uint16_t)port), proto};
    char key[16];
    snprintf(key, sizeof key, "%d", k.port);
    return lookup_service("getservbyport_r", key, &k, se, buffer, buflen, errnop);
}

// ---- enumeration (getent passwd, getent group)

static pthread_mutex_t enum_mu = PTHREAD_MUTEX_INITIALIZER;
static long pw_next;
static long gr_next;

enum nss_status NSS_FN(setpwent)(void) {
    pthread_mutex_lock(&enum_mu);
    pw_next = 0;
    pthread_mutex_unlock(&enum_mu);
    return NSS_STATUS_SUCCESS;
}

enum nss_status NSS_FN(endpwent)(void) {
    return NSS_FN(setpwent)();
}

enum nss_status NSS_FN(getpwent_r)(struct passwd* pw, char* buffer, size_t buflen, int* errnop) {
    enum nss_status s = prologue("getpwent_r", "", errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    pthread_mutex_lock(&enum_mu);
    char* line = NULL;
    struct fields fl;
    if (!find_entry("user", user_any, NULL, pw_next, &line, &fl)) {
        s = NSS_STATUS_NOTFOUND;
        *errnop = ENOENT;
    } else {
        s = fill_passwd(&fl, pw, buffer, buflen, errnop);
        if (s == NSS_STATUS_SUCCESS) ++pw_next;  // ERANGE: the same entry again
    }
    pthread_mutex_unlock(&enum_mu);
    free(line);
    return s;
}

enum nss_status NSS_FN(setgrent)(void) {
    pthread_mutex_lock(&enum_mu);
    gr_next = 0;
    pthread_mutex_unlock(&enum_mu);
    return NSS_STATUS_SUCCESS;
}

enum nss_status NSS_FN(endgrent)(void) {
    return NSS_FN(setgrent)();
}

enum nss_status NSS_FN(getgrent_r)(struct group* gr, char* buffer, size_t buflen, int* errnop) {
    enum nss_status s = prologue("getgrent_r", "", errnop);
    if (s != NSS_STATUS_SUCCESS) return s;
    pthread_mutex_lock(&enum_mu);
    char* line = NULL;
    struct fields fl;
    if (!find_entry("group", group_any, NULL, gr_next, &line, &fl)) {
        s = NSS_STATUS_NOTFOUND;
        *errnop = ENOENT;
    } else {
        s = fill_group(&fl, gr, buffer, buflen, errnop);
        if (s == NSS_STATUS_SUCCESS) ++gr_next;
    }
    pthread_mutex_unlock(&enum_mu);
    free(line);
    return s;
}
