// SPDX-License-Identifier: BSD-3-Clause
/* The socket side of nss/protocol.h: one request, one response per connection to
 * NSCACHE_NSS_SOCKET, every wait bounded by a deadline, nothing read from a daemon that is
 * neither root nor this process's own user. Thread-safe (no shared state). */
#ifndef NSCACHE_NSS_SOCKET_CLIENT_H
#define NSCACHE_NSS_SOCKET_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "reply.h"

enum nss_ask_result {
    NSS_ASK_OK,     /* reply holds the daemon's answer */
    NSS_ASK_DOWN,   /* no daemon we trust: socket missing, refused, not permitted, not a
                       socket, or its owner is another user. Fails at once. */
    NSS_ASK_FAILED, /* the daemon took too long or answered something malformed */
};

/* Asks the daemon (op, family, data) and waits until deadline_ms (nss_now_ms clock).
 * *map_id gets the id of the map the daemon publishes in. */
enum nss_ask_result nss_socket_ask(int op, int family, const void* data, size_t len,
                                   int64_t deadline_ms, struct nss_reply* reply, uint32_t* map_id);

/* Asks the daemon for its map (NSCACHE_NSS_GET_MAP). On NSS_ASK_OK, *map_fd is the received
 * descriptor (the caller owns it; not checked yet), *size and *map_id what the daemon says
 * it is. */
enum nss_ask_result nss_socket_get_map(int64_t deadline_ms, int* map_fd, uint64_t* size,
                                       uint32_t* map_id);

#endif
