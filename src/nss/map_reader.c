/* Reads the shared map: lazy thread-safe open and mmap, header checks, and the seqlocked copy
 * of a slot that never accepts a torn, foreign, stale-generation or expired entry. */
#include "map_reader.h"

#include <fcntl.h>
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
    dev_t dev;
    ino_t ino;
};

/* The mapping lookups use; published with release, read with acquire. */
static struct map_view* g_view;
/* Every mapping ever made; entries are written once, under g_open_lock, and never freed. */
static struct map_view g_views[NSS_MAP_MAX_VIEWS];
static unsigned g_view_count;
static int g_open_lock;
/* No open (or stat) of the map file before this time. */
static int64_t g_next_open_ms;

static const char* map_path(void) {
    const char* env = secure_getenv("NSCACHE_NSS_MAP");
    return env != NULL && env[0] != '\0' ? env : NSCACHE_NSS_MAP;
}

static const struct nscache_map_header* header_of(const struct map_view* v) {
    return (const struct nscache_map_header*)v->base;
}

static bool view_live(const struct map_view* v) {
    const struct nscache_map_header* h = header_of(v);
    return __atomic_load_n(&h->magic, __ATOMIC_RELAXED) == NSCACHE_MAP_MAGIC &&
           __atomic_load_n(&h->version, __ATOMIC_RELAXED) == NSCACHE_NSS_VERSION &&
           __atomic_load_n(&h->live, __ATOMIC_ACQUIRE) == 1u;
}

/* Maps the file at path if it is a well-formed, live map. Called with g_open_lock held. */
static struct map_view* open_locked(void) {
    const int fd = open(map_path(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return NULL;
    struct stat st;
    /* A world-writable map could be forged by anyone: never trust it. */
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || (st.st_mode & S_IWOTH) != 0) {
        close(fd);
        return NULL;
    }
    struct map_view* cur = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    if (cur != NULL && cur->dev == st.st_dev && cur->ino == st.st_ino) {
        close(fd); /* the same file: its header decides */
        return view_live(cur) ? cur : NULL;
    }
    if (g_view_count >= NSS_MAP_MAX_VIEWS || st.st_size < (off_t)SLOTS_OFFSET) {
        close(fd);
        return NULL;
    }
    const size_t size = (size_t)st.st_size;
    void* base = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return NULL;

    const struct nscache_map_header* h = base;
    const uint32_t count = h->slot_count;
    const bool ok = h->magic == NSCACHE_MAP_MAGIC && h->version == NSCACHE_NSS_VERSION &&
                    h->slot_size == NSCACHE_MAP_SLOT_SIZE && count >= 2 &&
                    (count & (count - 1u)) == 0 &&
                    (uint64_t)count * NSCACHE_MAP_SLOT_SIZE <= (uint64_t)size - SLOTS_OFFSET &&
                    __atomic_load_n(&h->live, __ATOMIC_ACQUIRE) == 1u;
    if (!ok) {
        munmap(base, size); /* never published: nobody else can be reading it */
        return NULL;
    }
    struct map_view* v = &g_views[g_view_count++];
    v->base = base;
    v->size = size;
    v->slot_count = count;
    v->dev = st.st_dev;
    v->ino = st.st_ino;
    __atomic_store_n(&g_view, v, __ATOMIC_RELEASE);
    return v;
}

/* (Re)opens the map unless that was tried less than NSS_MAP_REOPEN_MS ago or another thread
 * is at it; returns a live view or NULL. */
static struct map_view* refresh(int64_t now) {
    if (now < __atomic_load_n(&g_next_open_ms, __ATOMIC_RELAXED)) return NULL;
    if (!owner_lock_try(&g_open_lock)) return NULL;
    struct map_view* v = NULL;
    if (now >= __atomic_load_n(&g_next_open_ms, __ATOMIC_RELAXED)) {
        __atomic_store_n(&g_next_open_ms, now + NSS_MAP_REOPEN_MS, __ATOMIC_RELAXED);
        v = open_locked();
    }
    owner_lock_release(&g_open_lock);
    return v;
}

void nss_map_check_replaced(void) {
    const int64_t now = nss_coarse_ms();
    if (now < __atomic_load_n(&g_next_open_ms, __ATOMIC_RELAXED)) return;
    struct map_view* cur = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    struct stat st;
    if (cur != NULL && view_live(cur) &&
        (stat(map_path(), &st) != 0 || (st.st_dev == cur->dev && st.st_ino == cur->ino))) {
        __atomic_store_n(&g_next_open_ms, now + NSS_MAP_REOPEN_MS, __ATOMIC_RELAXED);
        return;
    }
    refresh(now);
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
    struct map_view* v = __atomic_load_n(&g_view, __ATOMIC_ACQUIRE);
    if (v == NULL || !view_live(v)) {
        v = refresh(nss_coarse_ms());
        if (v == NULL) return false;
    }
    const uint32_t generation = __atomic_load_n(&header_of(v)->generation, __ATOMIC_ACQUIRE);
    const uint64_t hash = nscache_map_hash(key, key_len);
    const uint32_t index = nscache_map_slot_index(hash, v->slot_count);
    return read_slot(v, index, key, key_len, hash, generation, reply) == SLOT_HIT ||
           read_slot(v, index ^ 1u, key, key_len, hash, generation, reply) == SLOT_HIT;
}
