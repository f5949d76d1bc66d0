// SPDX-License-Identifier: BSD-3-Clause
/* Asking one question: the shared map first, the daemon's socket on a miss. Answers come back
 * as a reply with a checked payload view. Thread-safe. */
#ifndef NSCACHE_NSS_LOOKUP_H
#define NSCACHE_NSS_LOOKUP_H

#include <stddef.h>
#include <stdint.h>

#include "reply.h"
#include "search_list.h"

/* How long one NSS call may wait for the daemon, over every candidate name it tries. */
#define NSS_DAEMON_TIMEOUT_MS 5000

struct nss_answer {
    struct nss_reply reply;
    struct nss_payload payload; /* valid when the outcome was FOUND */
};

/* One name (text, no trailing dot) for family AF_INET, AF_INET6 or AF_UNSPEC. FOUND only with
 * at least one address of the family (either family for AF_UNSPEC); a found name without one
 * is NODATA. Releases and refills answer->reply. *deadline_ms bounds the wait for the daemon
 * over all the questions of one NSS call: 0 until the first of them needs the socket, which
 * sets it NSS_DAEMON_TIMEOUT_MS ahead (map hits never read the precise clock for it). */
enum nss_outcome nss_lookup_name(const char* name, size_t len, int family, int64_t* deadline_ms,
                                 struct nss_answer* answer);

/* One address (4 or 16 bytes) for its PTR names. FOUND only with a usable canonical name. */
enum nss_outcome nss_lookup_addr(const uint8_t* addr, size_t len, int family, int64_t* deadline_ms,
                                 struct nss_answer* answer);

#endif
