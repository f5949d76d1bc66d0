// SPDX-License-Identifier: BSD-3-Clause
/* Decoding the payload of nss/protocol.h (response or map slot) with every length checked,
 * and the reply buffer that holds it. */
#include <stdlib.h>
#include <string.h>

#include "reply.h"

void nss_reply_init(struct nss_reply* r) {
    r->status = NSCACHE_NSS_UNAVAIL;
    r->ttl = 0;
    r->payload = NULL;
    r->payload_len = 0;
    r->heap = NULL;
}

void nss_reply_release(struct nss_reply* r) {
    free(r->heap);
    r->heap = NULL;
    r->payload = NULL;
    r->payload_len = 0;
}

uint8_t* nss_reply_room(struct nss_reply* r, size_t n) {
    if (n > NSCACHE_NSS_MAX_PAYLOAD) return NULL;
    if (n <= sizeof r->inline_buf) return r->inline_buf;
    free(r->heap);
    r->heap = malloc(n);
    return r->heap;
}

static uint16_t get_u16(const uint8_t* p) {
    uint16_t v;
    memcpy(&v, p, 2); /* host order: both ends run on one machine */
    return v;
}

bool nss_name_ok(const char* name, size_t len) {
    if (len == 0 || len > 253) return false;
    for (size_t i = 0; i < len; ++i) {
        const unsigned char c = (unsigned char)name[i];
        const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                        (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.';
        if (!ok) return false;
    }
    return true;
}

/* Reads a u16 at *off, advancing it; false if it does not fit. */
static bool take_u16(const uint8_t* data, size_t len, size_t* off, uint16_t* v) {
    if (len - *off < 2) return false;
    *v = get_u16(data + *off);
    *off += 2;
    return true;
}

static bool take_bytes(size_t len, size_t* off, size_t n) {
    if (len - *off < n) return false;
    *off += n;
    return true;
}

bool nss_payload_parse(const uint8_t* data, size_t len, struct nss_payload* out) {
    memset(out, 0, sizeof *out);
    if (len == 0) return true;
    size_t off = 0;
    uint16_t n;
    if (!take_u16(data, len, &off, &out->canon_len)) return false;
    out->canon = (const char*)data + off;
    if (!take_bytes(len, &off, out->canon_len)) return false;
    if (memchr(out->canon, '\0', out->canon_len) != NULL) return false;

    if (!take_u16(data, len, &off, &out->alias_count)) return false;
    out->aliases = data + off;
    for (uint16_t i = 0; i < out->alias_count; ++i) {
        if (!take_u16(data, len, &off, &n)) return false;
        const uint8_t* name = data + off;
        if (!take_bytes(len, &off, n)) return false;
        if (memchr(name, '\0', n) != NULL) return false;
    }

    if (!take_u16(data, len, &off, &out->addr4_count)) return false;
    out->addr4 = data + off;
    if (!take_bytes(len, &off, (size_t)out->addr4_count * 4)) return false;
    if (!take_u16(data, len, &off, &out->addr6_count)) return false;
    out->addr6 = data + off;
    if (!take_bytes(len, &off, (size_t)out->addr6_count * 16)) return false;
    return true; /* trailing bytes are tolerated: a later version may append fields */
}

void nss_payload_next_alias(const uint8_t** cursor, const char** name, uint16_t* len) {
    *len = get_u16(*cursor);
    *name = (const char*)*cursor + 2;
    *cursor += 2 + *len;
}
