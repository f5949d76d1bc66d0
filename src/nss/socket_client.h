/* The socket side of nss/protocol.h: one request, one response per connection to
 * NSCACHE_NSS_SOCKET, every wait bounded by a deadline. Thread-safe (no shared state). */
#ifndef NSCACHE_NSS_SOCKET_CLIENT_H
#define NSCACHE_NSS_SOCKET_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "reply.h"

enum nss_ask_result {
    NSS_ASK_OK,     /* reply holds the daemon's answer */
    NSS_ASK_DOWN,   /* no daemon: socket missing, refused, not permitted. Fails at once. */
    NSS_ASK_FAILED, /* the daemon took too long or answered something malformed */
};

/* Asks the daemon (op, family, data) and waits until deadline_ms (nss_now_ms clock). */
enum nss_ask_result nss_socket_ask(int op, int family, const void* data, size_t len,
                                   int64_t deadline_ms, struct nss_reply* reply);

#endif
