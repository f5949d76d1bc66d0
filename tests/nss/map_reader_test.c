// SPDX-License-Identifier: BSD-3-Clause
/* Tests src/nss/map_reader.c against a writer of our own that follows protocol.h's seqlock
 * rules: first the reader's rules one by one (expiry, generation, neighbour slot, live flag,
 * a replaced map, descriptors that are not a sealed map), then a hammer: one writer process
 * rewriting colliding slots with self-describing answers while reader threads in this and other
 * processes check that every hit is whole, current and unexpired.
 *
 *   nss_map_reader_test DIR [SECONDS] [READER_PROCS] [THREADS]
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "map_reader.h"
#include "nss_clock.h"
#include "protocol.h"

#define SLOTS 16u
#define KEYS 24
#define OFFSET sizeof(struct nscache_map_header)

static int failures;

static void fail(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FAIL: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
}

#define CHECK(cond, ...)                \
    do {                                \
        if (!(cond)) fail(__VA_ARGS__); \
    } while (0)

/* ---- the writer side, as the daemon must do it -------------------------------------- */

struct map_file {
    uint8_t* base;
    size_t size;
    int fd;
    uint32_t id;
};

/* A map as the daemon makes it: a memfd, mapped read-write, then sealed with `seals`
 * (NSCACHE_MAP_SEALS, or fewer to test the reader's checks). */
static struct map_file create_map(uint32_t slots, unsigned seals) {
    static uint32_t next_id = 0x1000;
    const size_t size = OFFSET + (size_t)slots * NSCACHE_MAP_SLOT_SIZE;
    const int fd = memfd_create("test-map", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
        perror("create map");
        exit(2);
    }
    uint8_t* base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    struct nscache_map_header* h = (struct nscache_map_header*)base;
    h->magic = NSCACHE_MAP_MAGIC;
    h->version = NSCACHE_NSS_VERSION;
    h->slot_count = slots;
    h->slot_size = NSCACHE_MAP_SLOT_SIZE;
    h->generation = 1;
    h->map_id = ++next_id;
    __atomic_store_n(&h->live, 1u, __ATOMIC_RELEASE);
    if (seals != 0 && fcntl(fd, F_ADD_SEALS, (int)seals) != 0) {
        perror("seal");
        exit(2);
    }
    return (struct map_file){base, size, fd, h->map_id};
}

/* What the module does with the descriptor the socket passed it (a copy: adopt closes it). */
static bool adopt(const struct map_file* m) {
    return nss_map_adopt(dup(m->fd), m->size, m->id);
}

static void drop_map(struct map_file* m) {
    munmap(m->base, m->size);
    close(m->fd);
}

static struct nscache_map_header* header(struct map_file* m) {
    return (struct nscache_map_header*)m->base;
}

static uint64_t* slot_words(struct map_file* m, uint32_t i) {
    return (uint64_t*)(void*)(m->base + OFFSET + (size_t)i * NSCACHE_MAP_SLOT_SIZE);
}

/* Seqlock write of one slot: odd, release fence, the bytes, even with release. */
static void write_slot(struct map_file* m, uint32_t index, const struct nscache_map_slot* head,
                       const uint8_t* key, const uint8_t* payload, int pause_midway) {
    uint64_t words[NSCACHE_MAP_SLOT_SIZE / 8];
    memset(words, 0, sizeof words);
    memcpy(words, head, sizeof *head);
    uint8_t* bytes = (uint8_t*)words;
    memcpy(bytes + sizeof *head, key, head->key_len);
    memcpy(bytes + sizeof *head + head->key_len, payload, head->payload_len);
    uint64_t* dst = slot_words(m, index);
    uint32_t* seq = (uint32_t*)(void*)dst;
    const uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED);
    __atomic_store_n(seq, s + 1u, __ATOMIC_RELAXED);
    __atomic_thread_fence(__ATOMIC_RELEASE);
    /* word 0 holds seq and generation: write the generation half separately */
    __atomic_store_n(seq + 1, head->generation, __ATOMIC_RELAXED);
    const size_t n = (sizeof *head + head->key_len + head->payload_len + 7) / 8;
    for (size_t i = 1; i < n; ++i) {
        if (pause_midway && i == n / 2) sched_yield();
        __atomic_store_n(&dst[i], words[i], __ATOMIC_RELAXED);
    }
    __atomic_store_n(seq, s + 2u, __ATOMIC_RELEASE);
}

static size_t put_u16(uint8_t* p, size_t v) {
    const uint16_t x = (uint16_t)v;
    memcpy(p, &x, 2);
    return 2;
}

/* A self-describing answer for key i at version v and generation g. */
static size_t encode(uint8_t* out, int i, uint32_t v, uint32_t g) {
    size_t o = 0;
    char name[64];
    const int n = snprintf(name, sizeof name, "name%d.test", i);
    o += put_u16(out + o, (size_t)n);
    memcpy(out + o, name, (size_t)n);
    o += (size_t)n;
    o += put_u16(out + o, v % 3);
    for (uint32_t j = 0; j < v % 3; ++j) {
        const int k = snprintf(name, sizeof name, "a%u.v%u.test", j, v);
        o += put_u16(out + o, (size_t)k);
        memcpy(out + o, name, (size_t)k);
        o += (size_t)k;
    }
    o += put_u16(out + o, 1 + v % 4);
    for (uint32_t j = 0; j < 1 + v % 4; ++j) {
        const uint8_t a[4] = {(uint8_t)i, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)j};
        memcpy(out + o, a, 4);
        o += 4;
    }
    o += put_u16(out + o, 1 + v % 2);
    for (uint32_t j = 0; j < 1 + v % 2; ++j) {
        uint8_t a[16] = {0};
        a[0] = (uint8_t)i;
        memcpy(a + 1, &v, 4);
        memcpy(a + 5, &g, 4);
        a[9] = (uint8_t)j;
        memcpy(out + o, a, 16);
        o += 16;
    }
    return o;
}

static size_t name_key(uint8_t* key, int i) {
    char name[64];
    const int n = snprintf(name, sizeof name, "Name%d.TEST.", i); /* key lower-cases, drops dot */
    return nscache_map_key(key, NSCACHE_NSS_BY_NAME, 0, (const uint8_t*)name, (size_t)n);
}

static void publish(struct map_file* m, int i, uint32_t v, uint32_t generation, int64_t expires,
                    uint16_t status, int neighbour, int pause) {
    uint8_t key[NSCACHE_MAP_KEY_MAX], payload[NSCACHE_MAP_SLOT_SIZE];
    const size_t klen = name_key(key, i);
    const size_t plen = status == NSCACHE_NSS_FOUND ? encode(payload, i, v, generation) : 0;
    struct nscache_map_slot head;
    memset(&head, 0, sizeof head);
    head.generation = generation;
    head.key_hash = nscache_map_hash(key, klen);
    head.expires_ms = expires;
    head.key_len = (uint16_t)klen;
    head.status = status;
    head.ttl = 10;
    head.payload_len = (uint32_t)plen;
    const uint32_t idx =
        nscache_map_slot_index(head.key_hash, header(m)->slot_count) ^ (neighbour ? 1u : 0u);
    write_slot(m, idx, &head, key, payload, pause);
}

/* ---- the reader's checks ------------------------------------------------------------- */

static uint16_t u16(const uint8_t* p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Verifies a hit for key i is one whole answer of one version, not expired when written,
 * and of a generation at least min_gen. Returns the version. */
static uint32_t verify(const struct nss_reply* r, int i, uint32_t min_gen, const char* who) {
    struct nss_payload p;
    if (r->status != NSCACHE_NSS_FOUND || !nss_payload_parse(r->payload, r->payload_len, &p)) {
        fail("%s: key %d: bad status %u or payload (%u bytes)", who, i, r->status, r->payload_len);
        return 0;
    }
    char name[64];
    const int n = snprintf(name, sizeof name, "name%d.test", i);
    if (p.canon_len != (size_t)n || memcmp(p.canon, name, (size_t)n) != 0 || p.addr6_count == 0) {
        fail("%s: key %d: canonical name or addresses of another key", who, i);
        return 0;
    }
    uint32_t v, g;
    memcpy(&v, p.addr6 + 1, 4);
    memcpy(&g, p.addr6 + 5, 4);
    CHECK(v % 2 == 0, "%s: key %d version %u: an expired entry was returned", who, i, v);
    CHECK(g >= min_gen, "%s: key %d: generation %u older than the header's %u", who, i, g, min_gen);
    CHECK(p.alias_count == v % 3 && p.addr4_count == 1 + v % 4 && p.addr6_count == 1 + v % 2,
          "%s: key %d version %u: counts of another version (torn)", who, i, v);
    CHECK(r->ttl >= 1 && r->ttl <= 11, "%s: ttl %u", who, r->ttl);
    const uint8_t* cur = p.aliases;
    for (uint32_t j = 0; j < p.alias_count; ++j) {
        const char* a;
        uint16_t len;
        nss_payload_next_alias(&cur, &a, &len);
        const int k = snprintf(name, sizeof name, "a%u.v%u.test", j, v);
        CHECK(len == (size_t)k && memcmp(a, name, len) == 0, "%s: alias of another version (torn)",
              who);
    }
    for (uint32_t j = 0; j < p.addr4_count; ++j) {
        const uint8_t want[4] = {(uint8_t)i, (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)j};
        CHECK(memcmp(p.addr4 + 4 * j, want, 4) == 0, "%s: IPv4 address of another version (torn)",
              who);
    }
    for (uint32_t j = 0; j < p.addr6_count; ++j) {
        CHECK(p.addr6[16 * j] == (uint8_t)i && memcmp(p.addr6 + 16 * j + 1, &v, 4) == 0 &&
                  p.addr6[16 * j + 9] == (uint8_t)j,
              "%s: IPv6 address of another version (torn)", who);
    }
    (void)u16;
    return v;
}

static bool lookup(int i, struct nss_reply* r) {
    uint8_t key[NSCACHE_MAP_KEY_MAX];
    const size_t klen = name_key(key, i);
    nss_reply_init(r);
    return nss_map_lookup(key, klen, r);
}

static void sleep_ms(int ms) {
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The descriptors the module must refuse, whatever the socket says about them. */
static void untrusted_maps(const char* dir) {
    struct nss_reply r;
    CHECK(!lookup(1, &r), "a lookup without a map must miss");
    CHECK(nss_map_refresh_begin(), "a process without a map must ask for one");
    nss_map_refresh_end();
    CHECK(!nss_map_refresh_begin(), "the daemon is asked at most once a second");

    struct map_file m = create_map(SLOTS, 0);
    publish(&m, 1, 2, 1, nss_now_ms() + 10000, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(!adopt(&m), "an unsealed map must not be used (anyone could shrink it: SIGBUS)");
    CHECK(!lookup(1, &r), "an unsealed map must not be read");
    drop_map(&m);

    const unsigned all = NSCACHE_MAP_SEALS;
    const unsigned partial[] = {all & ~(unsigned)F_SEAL_SHRINK, all & ~(unsigned)F_SEAL_GROW,
                                all & ~(unsigned)F_SEAL_FUTURE_WRITE, all & ~(unsigned)F_SEAL_SEAL};
    for (size_t i = 0; i < sizeof partial / sizeof partial[0]; ++i) {
        m = create_map(SLOTS, partial[i]);
        CHECK(!adopt(&m), "a map missing seal %#x must not be used", all & ~partial[i]);
        drop_map(&m);
    }

    m = create_map(SLOTS, all);
    CHECK(!nss_map_adopt(dup(m.fd), m.size + NSCACHE_MAP_SLOT_SIZE, m.id),
          "a map of another size than advertised must not be used");
    CHECK(!nss_map_adopt(dup(m.fd), m.size, m.id + 1), "a map with another id must not be used");
    CHECK(!nss_map_adopt(dup(m.fd), m.size, 0), "map id 0 is never valid");
    __atomic_store_n(&header(&m)->live, 0u, __ATOMIC_RELEASE);
    CHECK(!adopt(&m), "a map that is not live must not be used");
    drop_map(&m);

    /* A file on disk: no seals to be had. A FIFO: not a regular file, and never opened. */
    char path[512];
    snprintf(path, sizeof path, "%s/plain.map", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    const size_t size = OFFSET + (size_t)SLOTS * NSCACHE_MAP_SLOT_SIZE;
    CHECK(fd >= 0 && ftruncate(fd, (off_t)size) == 0, "cannot make %s", path);
    CHECK(!nss_map_adopt(fd, size, 1), "a plain file must not be used as the map");
    snprintf(path, sizeof path, "%s/fifo.map", dir);
    unlink(path);
    CHECK(mkfifo(path, 0600) == 0, "mkfifo");
    fd = open(path, O_RDWR | O_NONBLOCK | O_CLOEXEC);
    CHECK(fd >= 0 && !nss_map_adopt(fd, size, 1), "a FIFO must not be used as the map");
    unlink(path);
}

/* The reader's rules, one at a time. */
static void functional(const char* dir) {
    struct nss_reply r;
    untrusted_maps(dir);

    struct map_file m = create_map(SLOTS, NSCACHE_MAP_SEALS);
    CHECK(adopt(&m), "a sealed, live map of the advertised size must be used");
    CHECK(!nss_map_refresh_begin(), "a process with a live map must not ask for another");
    const int64_t now = nss_now_ms();

    CHECK(!lookup(1, &r), "an empty map must miss");
    publish(&m, 1, 2, 1, now + 10000, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(lookup(1, &r), "a written slot must hit");
    if (r.payload) verify(&r, 1, 1, "functional");
    CHECK(r.ttl == 10, "ttl left should be 10, got %u", r.ttl);

    publish(&m, 2, 4, 1, now + 10000, NSCACHE_NSS_FOUND, 1, 0);
    CHECK(lookup(2, &r), "a key in the neighbour slot (index ^ 1) must hit");

    publish(&m, 1, 6, 1, now - 1, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(!lookup(1, &r), "an expired slot must miss");

    publish(&m, 1, 8, 1, nss_now_ms() + 150, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(lookup(1, &r), "a slot with 150 ms left must hit");
    sleep_ms(200);
    CHECK(!lookup(1, &r), "the same slot 200 ms later must miss");

    publish(&m, 3, 2, 1, now + 10000, NSCACHE_NSS_NOTFOUND, 0, 0);
    CHECK(lookup(3, &r) && r.status == NSCACHE_NSS_NOTFOUND && r.payload_len == 0,
          "a negative entry must hit with its status");

    publish(&m, 4, 2, 1, now + 10000, NSCACHE_NSS_FOUND, 0, 0);
    __atomic_store_n(&header(&m)->generation, 2u, __ATOMIC_RELEASE);
    CHECK(!lookup(4, &r), "a slot of an older generation (flushed) must miss");
    publish(&m, 4, 4, 2, now + 10000, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(lookup(4, &r), "a slot of the current generation must hit");

    /* A slot whose lengths run past its end is not trusted. */
    {
        uint8_t key[NSCACHE_MAP_KEY_MAX];
        const size_t klen = name_key(key, 5);
        struct nscache_map_slot head;
        memset(&head, 0, sizeof head);
        head.generation = 2;
        head.key_hash = nscache_map_hash(key, klen);
        head.expires_ms = now + 10000;
        head.key_len = (uint16_t)klen;
        head.payload_len = 2000;
        uint8_t payload[NSCACHE_MAP_SLOT_SIZE] = {0};
        struct nscache_map_slot small = head;
        small.payload_len = 0;
        write_slot(&m, nscache_map_slot_index(head.key_hash, SLOTS), &small, key, payload, 0);
        /* now corrupt the length in place, as a buggy writer would */
        uint32_t* plen = (uint32_t*)(void*)((uint8_t*)slot_words(
                                                &m, nscache_map_slot_index(head.key_hash, SLOTS)) +
                                            offsetof(struct nscache_map_slot, payload_len));
        __atomic_store_n(plen, 2000u, __ATOMIC_RELEASE);
        CHECK(!lookup(5, &r), "a slot with payload_len past the slot must miss");
    }

    /* A slot being written (odd seq) is a miss after bounded retries, not a hang. */
    {
        uint32_t* seq = (uint32_t*)(void*)slot_words(&m, 0);
        const uint32_t s = __atomic_load_n(seq, __ATOMIC_RELAXED);
        __atomic_store_n(seq, s | 1u, __ATOMIC_RELEASE);
        for (int i = 0; i < KEYS; ++i) lookup(i, &r); /* must return */
        __atomic_store_n(seq, s, __ATOMIC_RELEASE);
    }

    /* The daemon stops: live = 0, every lookup misses, and the process asks again (once the
     * second since it last asked has passed). */
    __atomic_store_n(&header(&m)->live, 0u, __ATOMIC_RELEASE);
    CHECK(!lookup(4, &r), "a map that is not live must miss");
    sleep_ms(1100);
    CHECK(nss_map_refresh_begin(), "a process whose map stopped must ask for the new one");
    nss_map_refresh_end();

    /* The daemon starts again with a new map. */
    struct map_file m2 = create_map(SLOTS * 2, NSCACHE_MAP_SEALS);
    publish(&m2, 4, 10, 1, nss_now_ms() + 10000, NSCACHE_NSS_FOUND, 0, 0);
    CHECK(adopt(&m2), "the new daemon's map must be used");
    CHECK(lookup(4, &r) && verify(&r, 4, 1, "restart") == 10,
          "the answer must come from the new map");

    /* A crash leaves the old map marked live; the socket's answers name the new map. */
    struct map_file m3 = create_map(SLOTS, NSCACHE_MAP_SEALS);
    publish(&m3, 6, 12, 1, nss_now_ms() + 10000, NSCACHE_NSS_FOUND, 0, 0);
    nss_map_note_id(m2.id);
    CHECK(lookup(4, &r), "an answer naming the held map keeps it");
    nss_map_note_id(m3.id);
    CHECK(!lookup(4, &r), "a map the daemon no longer publishes in must not be read");
    CHECK(adopt(&m3) && lookup(6, &r), "the map the answers name must be used");
    CHECK(adopt(&m3) && lookup(6, &r), "the same map handed over again must stay in use");

    /* At most NSS_MAP_MAX_VIEWS mappings over the life of a process: 3 so far. */
    struct map_file more[NSS_MAP_MAX_VIEWS];
    for (int i = 0; i < NSS_MAP_MAX_VIEWS - 3; ++i) {
        more[i] = create_map(2, NSCACHE_MAP_SEALS);
        CHECK(adopt(&more[i]), "map %d of %d must be used", i + 4, NSS_MAP_MAX_VIEWS);
    }
    struct map_file extra = create_map(2, NSCACHE_MAP_SEALS);
    CHECK(!adopt(&extra), "past NSS_MAP_MAX_VIEWS maps the process must stop mapping more");
    for (int i = 0; i < NSS_MAP_MAX_VIEWS - 3; ++i)
        __atomic_store_n(&header(&more[i])->live, 0u, __ATOMIC_RELEASE);

    drop_map(&m);
    drop_map(&m2);
    drop_map(&m3);
    drop_map(&extra);
    for (int i = 0; i < NSS_MAP_MAX_VIEWS - 3; ++i) drop_map(&more[i]);
}

/* ---- the hammer ---------------------------------------------------------------------- */

static volatile int stop_readers;
static struct map_file g_hammer;

struct reader_stats {
    long hits, misses;
};

static void* reader(void* arg) {
    struct reader_stats* st = arg;
    unsigned seed = (unsigned)(uintptr_t)arg ^ (unsigned)getpid();
    while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
        const int i = (int)(rand_r(&seed) % KEYS);
        const uint32_t min_gen = __atomic_load_n(&header(&g_hammer)->generation, __ATOMIC_ACQUIRE);
        struct nss_reply r;
        if (lookup(i, &r)) {
            ++st->hits;
            verify(&r, i, min_gen, "hammer");
        } else {
            ++st->misses;
        }
        nss_reply_release(&r);
    }
    return NULL;
}

/* Runs in its own process: rewrites slots until killed. Odd versions are written already
 * expired; every 5000 writes the generation is bumped (a flush). */
static void writer_loop(void) {
    unsigned seed = 12345;
    uint32_t v = 0;
    for (long n = 0;; ++n) {
        const int i = (int)(rand_r(&seed) % KEYS);
        ++v;
        const uint32_t g = __atomic_load_n(&header(&g_hammer)->generation, __ATOMIC_RELAXED);
        const int64_t expires = v % 2 == 0 ? nss_now_ms() + 10000 : nss_now_ms() - 1;
        /* (the reader reads its clock after the copy, so even a just-expired slot is a miss) */
        publish(&g_hammer, i, v, g, expires, NSCACHE_NSS_FOUND, (int)(rand_r(&seed) & 1u),
                n % 7 == 0);
        if (n % 5000 == 4999)
            __atomic_store_n(&header(&g_hammer)->generation, g + 1, __ATOMIC_RELEASE);
    }
}

static int reader_process(int threads, int seconds, struct reader_stats* total) {
    pthread_t tid[64];
    struct reader_stats st[64];
    memset(st, 0, sizeof st);
    for (int t = 0; t < threads; ++t) pthread_create(&tid[t], NULL, reader, &st[t]);
    sleep_ms(seconds * 1000);
    __atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
    for (int t = 0; t < threads; ++t) {
        pthread_join(tid[t], NULL);
        total->hits += st[t].hits;
        total->misses += st[t].misses;
    }
    return failures;
}

/* Runs in a fresh process (the functional part used up this one's mappings). */
static void hammer(int seconds, int procs, int threads) {
    g_hammer = create_map(SLOTS, NSCACHE_MAP_SEALS);
    if (!adopt(&g_hammer)) {
        fail("the hammer's map was refused");
        return;
    }

    const pid_t writer = fork();
    if (writer == 0) {
        writer_loop();
        _exit(0);
    }
    pid_t kids[16];
    int nkids = 0;
    for (int p = 0; p < procs && p < 16; ++p) {
        const pid_t k = fork();
        if (k == 0) {
            struct reader_stats t = {0, 0};
            const int f = reader_process(threads, seconds, &t);
            printf("reader process %d: hits %ld misses %ld failures %d\n", (int)getpid(), t.hits,
                   t.misses, f);
            fflush(stdout);
            _exit(f == 0 && t.hits > 0 ? 0 : 1);
        }
        kids[nkids++] = k;
    }
    struct reader_stats t = {0, 0};
    reader_process(threads, seconds, &t);
    printf("reader process %d (main): hits %ld misses %ld failures %d\n", (int)getpid(), t.hits,
           t.misses, failures);
    CHECK(t.hits > 0, "the hammer readers never hit: the test proves nothing");
    kill(writer, SIGKILL);
    waitpid(writer, NULL, 0);
    for (int k = 0; k < nkids; ++k) {
        int status = 0;
        waitpid(kids[k], &status, 0);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "reader process %d failed",
              (int)kids[k]);
    }
    drop_map(&g_hammer);
}

int main(int argc, char** argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR [SECONDS] [READER_PROCS] [THREADS]\n", argv[0]);
        return 64;
    }
    const int seconds = argc > 2 ? atoi(argv[2]) : 3;
    const int procs = argc > 3 ? atoi(argv[3]) : 2;
    const int threads = argc > 4 ? atoi(argv[4]) : 2;
    alarm((unsigned)(seconds + 60)); /* a hang is a failure, never a stuck CI */
    const pid_t checks = fork();
    if (checks == 0) {
        functional(argv[1]);
        printf("functional checks: %d failures\n", failures);
        _exit(failures == 0 ? 0 : 1);
    }
    int status = 0;
    waitpid(checks, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the functional checks failed");
    hammer(seconds, procs, threads);
    printf("%s\n", failures == 0 ? "PASS" : "FAIL");
    return failures == 0 ? 0 : 1;
}
