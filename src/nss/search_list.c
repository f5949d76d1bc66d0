// SPDX-License-Identifier: BSD-3-Clause
/* The search list: resolv.conf read through glibc's own res_ninit (reloaded when the file
 * changes, looked at no more than once a second), and res_search's candidate order. */
#include "search_list.h"

#include <ctype.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <sched.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "nss_clock.h"
#include "owner_lock.h"

#define RESOLV_CHECK_MS 1000
#define NAME_MAX_TEXT 254 /* 253 characters and a trailing dot */

struct search_config {
    unsigned ndots;
    int options; /* RES_DEFNAMES, RES_DNSRCH, RES_NOTLDQUERY, RES_NOALIASES */
    unsigned count;
    char domains[MAXDNSRCH][NAME_MAX_TEXT + 1];
};

/* The loaded configuration, written under g_lock; g_version counts loads (0: none yet).
 * Each thread copies it once per version, so the common path takes no lock. */
static struct search_config g_config;
static unsigned g_version;
static int g_lock;
static int64_t g_next_check_ms;
static struct stat g_seen; /* resolv.conf as last loaded */
static bool g_seen_valid;

static __thread struct search_config t_config;
static __thread unsigned t_version;

static void lock_blocking(void) {
    while (!owner_lock_try(&g_lock)) sched_yield();
}

static bool same_file(const struct stat* a, const struct stat* b) {
    return a->st_dev == b->st_dev && a->st_ino == b->st_ino && a->st_size == b->st_size &&
           a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
           a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Reads resolv.conf the way glibc does (defaults for a missing file). Called under g_lock. */
static void load_locked(void) {
    struct __res_state st;
    memset(&st, 0, sizeof st);
    res_ninit(&st); /* on failure it still leaves glibc's defaults */
    struct search_config c;
    memset(&c, 0, sizeof c);
    c.ndots = st.ndots;
    c.options = (int)st.options;
    for (unsigned i = 0; i < MAXDNSRCH && st.dnsrch[i] != NULL; ++i) {
        const size_t n = strlen(st.dnsrch[i]);
        if (n > NAME_MAX_TEXT) continue;
        memcpy(c.domains[c.count++], st.dnsrch[i], n + 1);
    }
    res_nclose(&st);
    g_config = c;
    __atomic_store_n(&g_version, g_version + 1u, __ATOMIC_RELEASE);
}

static void check_file_locked(int64_t now) {
    __atomic_store_n(&g_next_check_ms, now + RESOLV_CHECK_MS, __ATOMIC_RELAXED);
    struct stat st;
    const bool exists = stat(_PATH_RESCONF, &st) == 0;
    if (g_version != 0 && exists == g_seen_valid && (!exists || same_file(&st, &g_seen))) return;
    g_seen_valid = exists;
    if (exists) g_seen = st;
    load_locked();
}

static const struct search_config* current_config(void) {
    const int64_t now = nss_coarse_ms();
    if (now >= __atomic_load_n(&g_next_check_ms, __ATOMIC_RELAXED) && owner_lock_try(&g_lock)) {
        if (now >= __atomic_load_n(&g_next_check_ms, __ATOMIC_RELAXED)) check_file_locked(now);
        owner_lock_release(&g_lock);
    }
    const unsigned v = __atomic_load_n(&g_version, __ATOMIC_ACQUIRE);
    if (v == 0 || v != t_version) {
        lock_blocking();
        if (g_version == 0) check_file_locked(now);
        t_config = g_config;
        t_version = g_version;
        owner_lock_release(&g_lock);
    }
    return &t_config;
}

/* HOSTALIASES (not for set-user-ID programs: secure_getenv): a file of "alias name" lines
 * that rewrites a name without dots. Returns true and fills out when name has an alias. */
static bool host_alias(const char* name, char* out, size_t out_size) {
    const char* file = secure_getenv("HOSTALIASES");
    if (file == NULL) return false;
    FILE* f = fopen(file, "rce");
    if (f == NULL) return false;
    char line[512];
    bool found = false;
    for (int lines = 0; lines < 10000 && fgets(line, sizeof line, f) != NULL; ++lines) {
        char* save = NULL;
        const char* alias = strtok_r(line, " \t\r\n", &save);
        const char* target = strtok_r(NULL, " \t\r\n", &save);
        if (alias == NULL || target == NULL || strcasecmp(alias, name) != 0) continue;
        if (strlen(target) >= out_size) break;
        strcpy(out, target);
        found = true;
        break;
    }
    fclose(f);
    return found;
}

/* Asks name (plus "." domain, if any) with the trailing dot stripped. */
static enum nss_outcome ask_joined(const char* name, size_t len, const char* domain, nss_ask_fn ask,
                                   void* ctx) {
    char full[NAME_MAX_TEXT + 2];
    while (len > 0 && name[len - 1] == '.') --len;
    size_t n = len;
    const size_t d = domain != NULL ? strlen(domain) : 0;
    if (len == 0 || len + (d ? d + 1 : 0) > NAME_MAX_TEXT - 1) return NSS_OUT_NOTFOUND;
    memcpy(full, name, len);
    if (d > 0) {
        full[n++] = '.';
        memcpy(full + n, domain, d);
        n += d;
    }
    full[n] = '\0';
    return ask(full, n, ctx);
}

/* What stops the search outright (res_search's "done"). */
static bool stops(enum nss_outcome o) {
    return o == NSS_OUT_FOUND || o == NSS_OUT_FAILED || o == NSS_OUT_BAD || o == NSS_OUT_DOWN;
}

enum nss_outcome nss_search(const char* name, nss_ask_fn ask, void* ctx) {
    const size_t len = strlen(name);
    if (len == 0 || len > NAME_MAX_TEXT) return NSS_OUT_NOTFOUND;
    const struct search_config* c = current_config();
    unsigned dots = 0;
    for (size_t i = 0; i < len; ++i) dots += name[i] == '.';
    const bool trailing_dot = name[len - 1] == '.';

    if (dots == 0 && (c->options & RES_NOALIASES) == 0) {
        char alias[NAME_MAX_TEXT + 1];
        if (host_alias(name, alias, sizeof alias))
            return ask_joined(alias, strlen(alias), NULL, ask, ctx);
    }

    enum nss_outcome saved = NSS_OUT_NOTFOUND;
    bool tried_as_is = false;
    if (dots >= c->ndots || trailing_dot) {
        const enum nss_outcome o = ask_joined(name, len, NULL, ask, ctx);
        if (stops(o) || trailing_dot) return o;
        saved = o;
        tried_as_is = true;
    }

    bool searched = false, root_on_list = false, got_nodata = false, got_servfail = false;
    if ((dots == 0 && (c->options & RES_DEFNAMES) != 0) ||
        (dots > 0 && !trailing_dot && (c->options & RES_DNSRCH) != 0)) {
        for (unsigned i = 0; i < c->count; ++i) {
            const char* domain = c->domains[i];
            searched = true;
            if (domain[0] == '.') ++domain;
            if (domain[0] == '\0') root_on_list = true;
            const enum nss_outcome o = ask_joined(name, len, domain, ask, ctx);
            if (stops(o)) return o;
            if (o == NSS_OUT_NODATA) got_nodata = true;
            if (o == NSS_OUT_SERVFAIL) got_servfail = true;
            if ((c->options & RES_DNSRCH) == 0) break;
        }
    }

    if ((dots > 0 || !searched || (c->options & RES_NOTLDQUERY) == 0) && !tried_as_is &&
        !root_on_list) {
        const enum nss_outcome o = ask_joined(name, len, NULL, ask, ctx);
        if (stops(o)) return o;
        /* res_search keeps h_errno from this last try unless an earlier one says more */
        if (!got_nodata && !got_servfail) return o;
    }

    if (tried_as_is) return saved;
    if (got_nodata) return NSS_OUT_NODATA;
    if (got_servfail) return NSS_OUT_SERVFAIL;
    return NSS_OUT_NOTFOUND;
}
