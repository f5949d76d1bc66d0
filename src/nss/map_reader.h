/* The reader side of the shared map (NSCACHE_NSS_MAP), mapped read-only once per process.
 * Thread-safe; lookups are lock-free: a hash, a seqlocked slot copy, a clock read. */
#ifndef NSCACHE_NSS_MAP_READER_H
#define NSCACHE_NSS_MAP_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "reply.h"

/* A map whose header says it is not live (the daemon stopped), or that cannot be opened, is
 * tried again at most this often. */
#define NSS_MAP_REOPEN_MS 1000
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

/* Called after the socket answered a miss: if the map file was replaced (the daemon restarted,
 * even after a crash that left the old file marked live) map the new one. Rate-limited to
 * one stat() a second. */
void nss_map_check_replaced(void);

#endif
