// SPDX-License-Identifier: BSD-3-Clause
/* The reader side of the shared map: the daemon's sealed memfd, received over the socket,
 * checked and mapped read-only, once per process and per daemon it sees. Thread-safe;
 * lookups are lock-free and make no system call: a hash, a seqlocked slot copy, a clock read
 * through the vDSO. */
#ifndef NSCACHE_NSS_MAP_READER_H
#define NSCACHE_NSS_MAP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"

/* The daemon is asked for its map at most this often (while there is no live map). */
#define NSS_MAP_REFRESH_MS 1000
/* Stable copies tried per slot before a busy slot counts as a miss. */
#define NSS_MAP_READ_TRIES 8
/* Mappings a process keeps over its life (one per daemon start it sees): an old mapping is
 * never unmapped, because another thread may be copying from it; past this many the process
 * stops using the map and asks the socket. */
#define NSS_MAP_MAX_VIEWS 16

/* Looks up key (nscache_map_key) in the map. On a hit (true) fills reply: status, TTL left
 * and the payload, copied out of the slot. A miss (false) is: no map, a map that is not live,
 * no slot with this key, a slot of another generation, an expired slot, or a slot the daemon
 * kept writing while we read. */
bool nss_map_lookup(const uint8_t* key, size_t key_len, struct nss_reply* reply);

/* True when this thread should ask the daemon for its map now: the process holds no live map
 * (none yet, the daemon stopped, or it answered from another map) and nobody asked within
 * NSS_MAP_REFRESH_MS. True also takes the refresh lock: call nss_map_refresh_end() after. */
bool nss_map_refresh_begin(void);
void nss_map_refresh_end(void);

/* Adopts the map the daemon sent: fd (owned: always closed), the size and map id its
 * response advertised. It is used only if it is a regular file of exactly that size carrying
 * every seal of NSCACHE_MAP_SEALS, with a well-formed, live header naming map_id. True if it
 * is now the map lookups use. */
bool nss_map_adopt(int fd, uint64_t size, uint32_t map_id);

/* Every socket answer names the map the daemon publishes in: an id other than the held map's
 * means the daemon was replaced (even after a crash that left the old map marked live), so
 * the held map is dropped and the next miss asks for the new one. */
void nss_map_note_id(uint32_t map_id);

#endif
