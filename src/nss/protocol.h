// SPDX-License-Identifier: BSD-3-Clause
/* The contract between the daemon and libnss_nscache.so.2, and nothing else: a C header the
 * NSS module compiles against without linking any daemon code.
 *
 * Two ways to get a hosts answer:
 *  1. The shared map: a read-only mmap of recently asked answers. A hit costs a hash, a copy
 *     and a clock read through the vDSO: no system call. Slots are seqlocked, so a reader never
 *     accepts a slot the daemon is writing, and every slot carries its absolute expiry
 *     (CLOCK_MONOTONIC, the same clock in every process), so an expired answer is never
 *     returned.
 *  2. The socket (NSCACHE_NSS_SOCKET): a unix stream socket, one request and one response per
 *     connection. The daemon answers from its cache or asks upstream, then publishes the answer
 *     in the map.
 *
 * The map has no path. The daemon makes it a sealed memfd and hands the descriptor to each
 * process that asks (NSCACHE_NSS_GET_MAP, SCM_RIGHTS): nobody can swap the file under the
 * readers (a FIFO or a device would hang or crash every process that resolves names), and
 * the seals keep any process but the daemon from writing, shrinking (SIGBUS in every reader)
 * or growing it. Before trusting anything from the socket, the module checks that the daemon
 * is root or its own user (SO_PEERCRED); before mapping the descriptor, that it is a regular
 * file of the advertised size carrying every seal of NSCACHE_MAP_SEALS.
 *
 * Integers are in host byte order (both ends run on the same machine).
 */
#ifndef NSCACHE_NSS_PROTOCOL_H
#define NSCACHE_NSS_PROTOCOL_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NSCACHE_NSS_SOCKET "/run/nscache/nss.sock"
/* 2: the map travels over the socket; responses carry the map's id. */
#define NSCACHE_NSS_VERSION 2u

/* ---- Socket messages -------------------------------------------------------------------- */

#define NSCACHE_NSS_REQUEST_MAGIC 0x5143534eu  /* "NSCQ" */
#define NSCACHE_NSS_RESPONSE_MAGIC 0x5243534eu /* "NSCR" */

enum nscache_nss_op {
    NSCACHE_NSS_BY_NAME = 1, /* data: the name as text, no trailing dot needed */
    NSCACHE_NSS_BY_ADDR = 2, /* data: 4 (AF_INET) or 16 (AF_INET6) address bytes */
    /* No data, family AF_UNSPEC. The response (status FOUND, payload: u64 size of the map in
     * bytes) carries the map's descriptor as SCM_RIGHTS on its first byte; any other status
     * carries none. */
    NSCACHE_NSS_GET_MAP = 3,
};

enum nscache_nss_status {
    NSCACHE_NSS_FOUND = 0,
    NSCACHE_NSS_NOTFOUND = 1, /* NXDOMAIN: the name does not exist */
    NSCACHE_NSS_NODATA = 2,   /* the name exists, with no address of the family asked */
    NSCACHE_NSS_TRYAGAIN = 3, /* upstream failure (SERVFAIL, timeout) */
    NSCACHE_NSS_UNAVAIL = 4,  /* the request was not understood */
};

/* Longest data in a request: a name in text form. */
#define NSCACHE_NSS_MAX_DATA 1024u
/* Longest payload in a response. */
#define NSCACHE_NSS_MAX_PAYLOAD 16384u

struct nscache_nss_request {
    uint32_t magic;
    uint16_t version;
    uint16_t op;       /* enum nscache_nss_op */
    int32_t family;    /* AF_INET, AF_INET6, or AF_UNSPEC (both, for gethostbyname4_r) */
    uint32_t data_len; /* followed by data_len bytes */
};

struct nscache_nss_response {
    uint32_t magic;
    uint16_t version;
    uint16_t status;      /* enum nscache_nss_status */
    int32_t family;       /* as asked */
    uint32_t ttl;         /* seconds the answer stays valid */
    uint32_t payload_len; /* followed by the payload */
    uint32_t map_id;      /* the map the daemon publishes in (its header's map_id) */
};

/* Payload (the same bytes in a response and in a map slot), each field after the previous:
 *   u16 canon_len, canon_len bytes: the canonical name (text, no trailing dot, no NUL)
 *   u16 alias_count, then per alias: u16 len, len bytes
 *   u16 addr4_count, then 4 bytes per address (network order)
 *   u16 addr6_count, then 16 bytes per address (network order)
 * By name: canon is the end of the CNAME chain, aliases the names before it.
 * By address: canon is the first PTR target, aliases the other PTR targets, and the one
 * address is the address asked for.
 */

/* ---- Shared map --------------------------------------------------------------------------- */

#define NSCACHE_MAP_MAGIC 0x4d43534eu /* "NSCM" */
#define NSCACHE_MAP_SLOT_SIZE 1024u
#define NSCACHE_MAP_KEY_MAX 260u
/* The seals (fcntl F_ADD_SEALS) a map must carry before a reader maps it: F_SEAL_SHRINK,
 * F_SEAL_GROW, F_SEAL_FUTURE_WRITE (the daemon's own writable mapping, made before, keeps
 * working; no new one can be made, by anyone) and F_SEAL_SEAL. */
#define NSCACHE_MAP_SEALS (0x0002u | 0x0004u | 0x0010u | 0x0001u)
/* The largest map a reader accepts. */
#define NSCACHE_MAP_MAX_BYTES (1ull << 30)

struct nscache_map_header {
    uint32_t magic;
    uint32_t version;
    uint32_t slot_count; /* a power of two */
    uint32_t slot_size;  /* NSCACHE_MAP_SLOT_SIZE */
    uint32_t live;       /* 1 while the daemon runs; 0 once it has stopped: ask for the map again */
    uint32_t generation; /* bumped by every flush: slots of another generation are invalid */
    uint32_t map_id;     /* random, never 0: which map a socket response speaks of */
    uint32_t reserved32;
    uint64_t reserved[4];
};

struct nscache_map_slot {
    uint32_t seq;        /* seqlock: odd while the daemon writes the slot */
    uint32_t generation; /* the header's generation when written */
    uint64_t key_hash;
    int64_t expires_ms; /* CLOCK_MONOTONIC, milliseconds */
    uint16_t key_len;
    uint16_t status; /* enum nscache_nss_status */
    uint32_t ttl;    /* as published, for the reader's convenience */
    uint32_t payload_len;
    uint32_t reserved;
    /* then key_len key bytes, then payload_len payload bytes, within the slot */
};

#define NSCACHE_MAP_SLOT_DATA (NSCACHE_MAP_SLOT_SIZE - sizeof(struct nscache_map_slot))
/* Slot i starts at NSCACHE_MAP_SLOTS_OFFSET + i * slot_size. */
#define NSCACHE_MAP_SLOTS_OFFSET sizeof(struct nscache_map_header)

/* Rules the writer keeps, which readers rely on:
 *  - the map is sealed (NSCACHE_MAP_SEALS) before its descriptor leaves the daemon, and a
 *    daemon publishes in one map for its whole life; a restarted daemon makes a new one with
 *    a new map_id, which every socket response names;
 *  - a slot's seq is odd from before its first data byte changes until after its last;
 *  - on stop, live is set to 0;
 *  - expires_ms is CLOCK_MONOTONIC of the daemon's time namespace: readers in another time
 *    namespace (a container given the socket) must not use the map. */

/* Keys: one byte op, one byte family (4 = AF_INET, 6 = AF_INET6, 0 = AF_UNSPEC), then the
 * lower-cased name without a trailing dot (by name) or the address bytes (by address). */
static inline size_t nscache_map_key(uint8_t* out, int op, int family, const uint8_t* data,
                                     size_t len) {
    size_t i;
    if (len + 2 > NSCACHE_MAP_KEY_MAX) return 0;
    out[0] = (uint8_t)op;
    out[1] = (uint8_t)(family == 2 ? 4 : family == 10 ? 6 : 0); /* AF_INET=2, AF_INET6=10 */
    for (i = 0; i < len; ++i) {
        uint8_t c = data[i];
        if (op == NSCACHE_NSS_BY_NAME && c >= 'A' && c <= 'Z') c = (uint8_t)(c + 32);
        out[2 + i] = c;
    }
    if (op == NSCACHE_NSS_BY_NAME && len > 0 && out[2 + len - 1] == '.') --len;
    return len + 2;
}

/* FNV-1a, 64 bit: both sides must compute the same slot, so no secret seed. The map has no
 * chains (a key lives in one of two slots), so colliding keys only displace each other. */
static inline uint64_t nscache_map_hash(const uint8_t* key, size_t len) {
    uint64_t h = 0xcbf29ce484222325ull;
    size_t i;
    for (i = 0; i < len; ++i) {
        h ^= key[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

/* A key may sit in slot (hash & mask) or its neighbour (hash & mask) ^ 1. */
static inline uint32_t nscache_map_slot_index(uint64_t hash, uint32_t slot_count) {
    return (uint32_t)(hash & (uint64_t)(slot_count - 1u));
}

#ifdef __cplusplus
}
#endif

#endif /* NSCACHE_NSS_PROTOCOL_H */
