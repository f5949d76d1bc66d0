// SPDX-License-Identifier: BSD-3-Clause
/* One answer for one question, whichever way it came (map slot or socket), and the decoded
 * view of its payload (nss/protocol.h). Not shared between threads: each lookup owns one. */
#ifndef NSCACHE_NSS_REPLY_H
#define NSCACHE_NSS_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "protocol.h"

/* Answers up to this size live inside the reply (every map hit does: a slot is 1 KiB);
 * longer socket answers go to the heap, bounded by NSCACHE_NSS_MAX_PAYLOAD. */
#define NSS_REPLY_INLINE 1024u

struct nss_reply {
    uint16_t status; /* enum nscache_nss_status */
    uint32_t ttl;    /* seconds left */
    const uint8_t* payload;
    uint32_t payload_len;
    uint8_t* heap; /* owned; freed by nss_reply_release */
    uint8_t inline_buf[NSS_REPLY_INLINE];
};

void nss_reply_init(struct nss_reply* r);
void nss_reply_release(struct nss_reply* r);
/* Room for n payload bytes in r (inline or heap); NULL if n is too large or malloc fails. */
uint8_t* nss_reply_room(struct nss_reply* r, size_t n);

/* A checked view of a payload: every count and length was verified against payload_len,
 * names contain no NUL byte. Pointers point into the payload. */
struct nss_payload {
    const char* canon;
    uint16_t canon_len;
    uint16_t alias_count;
    const uint8_t* aliases; /* alias_count x (u16 len, len bytes) */
    uint16_t addr4_count;
    const uint8_t* addr4;
    uint16_t addr6_count;
    const uint8_t* addr6;
};

/* Decodes and checks a payload; false if any length runs past the end or a name is bad.
 * An empty payload (negative answers) decodes to all counts zero. */
bool nss_payload_parse(const uint8_t* data, size_t len, struct nss_payload* out);

/* Next alias after *cursor (start with *cursor = p->aliases); sets *name and *len. */
void nss_payload_next_alias(const uint8_t** cursor, const char** name, uint16_t* len);

/* A host name glibc would accept from DNS: letters, digits, '-', '_' and '.', 1..253 long.
 * Names outside that set are dropped: they would reach callers that print or exec them. */
bool nss_name_ok(const char* name, size_t len);

#endif
