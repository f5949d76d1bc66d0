// SPDX-License-Identifier: BSD-3-Clause
/* Reads the shared map: adopting the daemon's sealed memfd (seals, size and header checked
 * before anything is read), and the seqlocked copy of a slot that never accepts a torn,
 * foreign, stale-generation or expired entry. */
#include "map_reader.h"

#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nss_clock.h"
#include "owner_lock.h"

/* Slots follow the header: slot i starts at sizeof(header) + i * slot_size. */
#define SLOTS_OFFSET sizeof(struct nscache_map_header)
#define SLOT_WORDS (NSCACHE_MAP_SLOT_SIZE / 8u)
#define SLOT_HEAD_WORDS (sizeof(struct nscache_map_slot) / 8u)

_Static_assert(sizeof(struct nscache_map_header) == 64, "header layout");
_Static_assert(sizeof(struct nscache_map_slot) % 8 == 0, "slot head is whole words");
_Static_assert(NSCACHE_MAP_SLOT_SIZE % 8 == 0, "slot is whole words");

struct map_view {
    const uint8_t* base;
    size_t size;
    uint32_t slot_count;
    uint32_t map_id;
    dev_t dev;
    ino_t ino;
};

/* The mapping lookups use; published with release, read with acquire. NULL: none usable. */
static struct map_view* g_view;
/* Every mapping ever made; entries are written once, under g_views_lock, and never freed. */
static struct map_view g_views[NSS_MAP_MAX_VIEWS];
static unsigned g_view_count;
static int g_views_lock;
/* One thread at a time asks the daemon for its map, and not before this time. */
static int g_refresh_lock;
static int64_t g_next_refresh_ms;

static const struct nscache_map_header* header_of(const struct map_view* v) {
    return (const struct nscache_map_header*)v->base;
}

static bool view_live(const struct map_view* v) {
    return __atomic_load_n(&header_of(v)->live, __ATOMIC_ACQUIRE) == 1u;
}

bool nss_map_refresh_begin(void) {
    const struct map_view* v = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    if (v != NULL && view_live(v)) return false;
    const int64_t now = nss_coarse_ms();
    if (now < __atomic_load_n(&g_next_refresh_ms, __ATOMIC_RELAXED)) return false;
    if (!owner_lock_try(&g_refresh_lock)) return false; /* another thread is asking */
    if (now < __atomic_load_n(&g_next_refresh_ms, __ATOMIC_RELAXED)) {
        owner_lock_release(&g_refresh_lock);
        return false;
    }
    __atomic_store_n(&g_next_refresh_ms, now + NSS_MAP_REFRESH_MS, __ATOMIC_RELAXED);
    return true;
}

void nss_map_refresh_end(void) {
    owner_lock_release(&g_refresh_lock);
}

void nss_map_note_id(uint32_t map_id) {
    struct map_view* v = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    if (v == NULL || map_id == 0 || v->map_id == map_id) return;
    /* The daemon publishes elsewhere now: stop reading this map. It stays mapped (a lookup
     * may be copying from it); the next miss asks for the new one. */
    __atomic_compare_exchange_n(&g_view, &v, NULL, false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
}

/* A map the daemon has sealed: nobody can shrink it (which would raise SIGBUS in every
 * reader), grow it, write it through a new mapping or write(2), or take the seals off. */
static bool sealed_as_promised(int fd, uint64_t size, struct stat* st) {
    const int seals = fcntl(fd, F_GET_SEALS);
    return fstat(fd, st) == 0 && S_ISREG(st->st_mode) && (uint64_t)st->st_size == size &&
           size >= SLOTS_OFFSET && size <= NSCACHE_MAP_MAX_BYTES && seals >= 0 &&
           ((unsigned)seals & NSCACHE_MAP_SEALS) == NSCACHE_MAP_SEALS;
}

/* Maps fd read-only and checks its header; NULL if it is not a live map named map_id. Called
 * with g_views_lock held. */
static struct map_view* map_new_view(int fd, size_t size, uint32_t map_id, const struct stat* st) {
    if (g_view_count >= NSS_MAP_MAX_VIEWS) return NULL;
    void* base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return NULL;
    const struct nscache_map_header* h = base;
    const uint32_t count = h->slot_count;
    const bool ok = h->magic == NSCACHE_MAP_MAGIC && h->version == NSCACHE_NSS_VERSION &&
                    h->slot_size == NSCACHE_MAP_SLOT_SIZE && count >= 2 &&
                    (count & (count - 1u)) == 0 &&
                    (uint64_t)count * NSCACHE_MAP_SLOT_SIZE <= (uint64_t)size - SLOTS_OFFSET &&
                    h->map_id == map_id && __atomic_load_n(&h->live, __ATOMIC_ACQUIRE) == 1u;
    if (!ok) {
        munmap(base, size); /* never published: nobody else can be reading it */
        return NULL;
    }
    struct map_view* v = &g_views[g_view_count++];
    v->base = base;
    v->size = size;
    v->slot_count = count;
    v->map_id = map_id;
    v->dev = st->st_dev;
    v->ino = st->st_ino;
    return v;
}

bool nss_map_adopt(int fd, uint64_t size, uint32_t map_id) {
    struct stat st;
    if (map_id == 0 || !sealed_as_promised(fd, size, &st)) {
        close(fd);
        return false;
    }
    while (!owner_lock_try(&g_views_lock)) sched_yield();
    /* The same memfd as a map mapped before (asked again after a miss): no new mapping. */
    struct map_view* v = NULL;
    for (unsigned i = 0; i < g_view_count && v == NULL; ++i) {
        if (g_views[i].dev == st.st_dev && g_views[i].ino == st.st_ino) v = &g_views[i];
    }
    if (v == NULL) v = map_new_view(fd, (size_t)size, map_id, &st);
    close(fd);
    const bool usable = v != NULL && v->map_id == map_id && view_live(v);
    if (usable) __atomic_store_n(&g_view, v, __ATOMIC_RELEASE);
    owner_lock_release(&g_views_lock);
    return usable;
}

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

/* Word-sized relaxed atomic loads: the daemon may be writing these bytes right now, and the
 * seqlock check after the copy decides whether the copy is kept. */
static void copy_words(uint64_t* dst, const uint64_t* src, size_t words) {
    for (size_t i = 0; i < words; ++i) dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
}

enum slot_result { SLOT_MISS, SLOT_HIT };

static enum slot_result read_slot(const struct map_view* v, uint32_t index, const uint8_t* key,
                                  size_t key_len, uint64_t hash, uint32_t generation,
                                  struct nss_reply* reply) {
    const uint8_t* raw = v->base + SLOTS_OFFSET + (size_t)index * NSCACHE_MAP_SLOT_SIZE;
    const struct nscache_map_slot* slot = (const struct nscache_map_slot*)raw;
    const uint64_t* words = (const uint64_t*)raw;
    uint64_t local[SLOT_WORDS];
    struct nscache_map_slot head;

    for (int attempt = 0; attempt < NSS_MAP_READ_TRIES; ++attempt) {
        const uint32_t s1 = __atomic_load_n(&slot->seq, __ATOMIC_ACQUIRE);
        if (s1 == 0) return SLOT_MISS; /* never written */
        if (s1 & 1u) {
            for (int i = 0; i < 64; ++i) cpu_relax();
            continue;
        }
        copy_words(local, words, SLOT_HEAD_WORDS);
        memcpy(&head, local, sizeof head);
        /* Another key (stable or half-written): a miss either way. */
        if (head.key_hash != hash || head.key_len != key_len) return SLOT_MISS;
        const size_t data = (size_t)head.key_len + head.payload_len;
        const bool fits = data <= NSCACHE_MAP_SLOT_DATA;
        if (fits) copy_words(local + SLOT_HEAD_WORDS, words + SLOT_HEAD_WORDS, (data + 7u) / 8u);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->seq, __ATOMIC_RELAXED) != s1) continue; /* torn: again */

        /* A stable copy. Everything below checks it, not the shared bytes; the clock is read
         * after the copy, so a slot that expired while we read it is a miss. The coarse clock
         * is never ahead of the precise one: a slot with more than a second left by it is
         * valid; a closer call reads the precise clock. */
        if (!fits) return SLOT_MISS;
        int64_t now = nss_coarse_ms();
        if (head.expires_ms - now <= 1000) now = nss_now_ms();
        const uint8_t* body = (const uint8_t*)local + sizeof head;
        if (head.generation != generation || memcmp(body, key, key_len) != 0 ||
            head.expires_ms <= now || head.status > NSCACHE_NSS_TRYAGAIN)
            return SLOT_MISS;
        uint8_t* room = nss_reply_room(reply, head.payload_len);
        if (room == NULL) return SLOT_MISS;
        memcpy(room, body + key_len, head.payload_len);
        reply->payload = room;
        reply->payload_len = head.payload_len;
        reply->status = head.status;
        /* Seconds left, rounded up as the daemon's own answers count them, and never more
         * than published (the coarse clock may lag by a tick). */
        const int64_t left_ms = head.expires_ms - now;
        const uint32_t left = (uint32_t)(left_ms / 1000 + (left_ms % 1000 != 0));
        reply->ttl = left < head.ttl ? left : head.ttl;
        return SLOT_HIT;
    }
    return SLOT_MISS;
}

bool nss_map_lookup(const uint8_t* key, size_t key_len, struct nss_reply* reply) {
    const struct map_view* v = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    if (v == NULL || !view_live(v)) return false;
    const uint32_t generation = __atomic_load_n(&header_of(v)->generation, __ATOMIC_ACQUIRE);
    const uint64_t hash = nscache_map_hash(key, key_len);
    const uint32_t index = nscache_map_slot_index(hash, v->slot_count);
    return read_slot(v, index, key, key_len, hash, generation, reply) == SLOT_HIT ||
           read_slot(v, index ^ 1u, key, key_len, hash, generation, reply) == SLOT_HIT;
}
