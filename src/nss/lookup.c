// SPDX-License-Identifier: BSD-3-Clause
/* One question, map then socket: builds the map key, falls back to the daemon on a miss, and
 * turns the answer's status and payload into a search outcome. */
#include "lookup.h"

#include <sys/socket.h>

#include "map_reader.h"
#include "nss_clock.h"
#include "socket_client.h"

static enum nss_outcome outcome_of(struct nss_answer* a, int op, int family) {
    switch (a->reply.status) {
        case NSCACHE_NSS_FOUND:
            break;
        case NSCACHE_NSS_NOTFOUND:
            return NSS_OUT_NOTFOUND;
        case NSCACHE_NSS_NODATA:
            return NSS_OUT_NODATA;
        case NSCACHE_NSS_TRYAGAIN:
            return NSS_OUT_SERVFAIL;
        default:
            return NSS_OUT_BAD;
    }
    if (!nss_payload_parse(a->reply.payload, a->reply.payload_len, &a->payload)) return NSS_OUT_BAD;
    const struct nss_payload* p = &a->payload;
    if (op == NSCACHE_NSS_BY_ADDR)
        return nss_name_ok(p->canon, p->canon_len) ? NSS_OUT_FOUND : NSS_OUT_BAD;
    const unsigned usable = family == AF_INET    ? p->addr4_count
                            : family == AF_INET6 ? p->addr6_count
                                                 : (unsigned)p->addr4_count + p->addr6_count;
    return usable > 0 ? NSS_OUT_FOUND : NSS_OUT_NODATA;
}

/* Asks the daemon for its map when the process has none it can use (the first miss in a
 * process, or a daemon restarted since). NSS_ASK_DOWN: no daemon to ask at all. */
static enum nss_ask_result refresh_map(int64_t deadline_ms) {
    if (!nss_map_refresh_begin()) return NSS_ASK_OK;
    int fd;
    uint64_t size;
    uint32_t map_id;
    const enum nss_ask_result r = nss_socket_get_map(deadline_ms, &fd, &size, &map_id);
    if (r == NSS_ASK_OK) nss_map_adopt(fd, size, map_id);
    nss_map_refresh_end();
    return r;
}

static enum nss_outcome ask(int op, int family, const uint8_t* data, size_t len,
                            int64_t* deadline_ms, struct nss_answer* a) {
    nss_reply_release(&a->reply);
    nss_reply_init(&a->reply);
    uint8_t key[NSCACHE_MAP_KEY_MAX];
    const size_t key_len = nscache_map_key(key, op, family, data, len);
    if (key_len != 0 && nss_map_lookup(key, key_len, &a->reply)) return outcome_of(a, op, family);

    if (*deadline_ms == 0) *deadline_ms = nss_now_ms() + NSS_DAEMON_TIMEOUT_MS;
    switch (refresh_map(*deadline_ms)) {
        case NSS_ASK_DOWN:
            return NSS_OUT_DOWN;
        default:
            /* A fresh map may hold the answer: another process asked for it already. */
            if (key_len != 0 && nss_map_lookup(key, key_len, &a->reply))
                return outcome_of(a, op, family);
            break;
    }
    uint32_t map_id = 0;
    switch (nss_socket_ask(op, family, data, len, *deadline_ms, &a->reply, &map_id)) {
        case NSS_ASK_OK:
            nss_map_note_id(map_id);
            return outcome_of(a, op, family);
        case NSS_ASK_DOWN:
            return NSS_OUT_DOWN;
        default:
            return NSS_OUT_FAILED;
    }
}

enum nss_outcome nss_lookup_name(const char* name, size_t len, int family, int64_t* deadline_ms,
                                 struct nss_answer* answer) {
    return ask(NSCACHE_NSS_BY_NAME, family, (const uint8_t*)name, len, deadline_ms, answer);
}

enum nss_outcome nss_lookup_addr(const uint8_t* addr, size_t len, int family, int64_t* deadline_ms,
                                 struct nss_answer* answer) {
    return ask(NSCACHE_NSS_BY_ADDR, family, addr, len, deadline_ms, answer);
}
