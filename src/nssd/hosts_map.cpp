// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/hosts_map.h"

#include "common/bytes.h"
#include "common/random.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace nscache::nssd {
namespace {

nscache_map_header* header_of(void* base) {
    return static_cast<nscache_map_header*>(base);
}

uint32_t load_acquire(const uint32_t& v) {
    return __atomic_load_n(&v, __ATOMIC_ACQUIRE);
}
void store_release(uint32_t& v, uint32_t x) {
    __atomic_store_n(&v, x, __ATOMIC_RELEASE);
}

}  // namespace

HostsMap::~HostsMap() {
    close();
}

std::optional<std::string> HostsMap::create(uint32_t slots) {
    close();
    const size_t size = sizeof(nscache_map_header) + size_t{slots} * NSCACHE_MAP_SLOT_SIZE;
    const int fd = memfd_create("nscache-hosts-map", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return std::string("cannot create the NSS map: ") + std::strerror(errno);
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        const std::string error = std::strerror(errno);
        ::close(fd);
        return "cannot size the NSS map: " + error;
    }
    // The one writable mapping there will ever be: F_SEAL_FUTURE_WRITE below refuses any
    // later one (and write(2)) to every process, this one included, but leaves this intact.
    void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) {
        const std::string error = std::strerror(errno);
        ::close(fd);
        return "cannot map the NSS map: " + error;
    }
    uint32_t id = 0;
    while (id == 0) id = static_cast<uint32_t>(secure_random_u64());
    nscache_map_header* h = header_of(base);
    h->magic = NSCACHE_MAP_MAGIC;
    h->version = NSCACHE_NSS_VERSION;
    h->slot_count = slots;
    h->slot_size = NSCACHE_MAP_SLOT_SIZE;
    h->generation = 1;
    h->map_id = id;
    store_release(h->live, 1);
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) !=
        0) {
        const std::string error = std::strerror(errno);
        munmap(base, size);
        ::close(fd);
        return "cannot seal the NSS map: " + error;
    }
    fd_ = fd;
    base_ = base;
    size_ = size;
    slot_count_ = slots;
    id_ = id;
    return std::nullopt;
}

nscache_map_slot* HostsMap::slot(uint32_t index) const {
    auto* bytes = static_cast<uint8_t*>(base_) + sizeof(nscache_map_header);
    return reinterpret_cast<nscache_map_slot*>(bytes + size_t{index} * NSCACHE_MAP_SLOT_SIZE);
}

uint32_t HostsMap::generation() const {
    return base_ == nullptr ? 0 : load_acquire(header_of(base_)->generation);
}

void HostsMap::publish(std::span<const uint8_t> key, uint16_t status, uint32_t ttl,
                       std::span<const uint8_t> payload, int64_t now_ms, uint32_t generation) {
    if (base_ == nullptr || ttl == 0 || key.size() + payload.size() > NSCACHE_MAP_SLOT_DATA) return;
    const uint64_t hash = nscache_map_hash(key.data(), key.size());
    const uint32_t first = nscache_map_slot_index(hash, slot_count_);
    // The key's own slot if it has one, else the one that expires first.
    nscache_map_slot* a = slot(first);
    nscache_map_slot* b = slot(first ^ 1u);
    nscache_map_slot* target = a->expires_ms <= b->expires_ms ? a : b;
    for (nscache_map_slot* s : {a, b}) {
        if (s->key_hash == hash && s->key_len == key.size() &&
            std::memcmp(reinterpret_cast<uint8_t*>(s + 1), key.data(), key.size()) == 0) {
            target = s;
        }
    }
    // Seqlock write: "odd" must be visible before any data store, "even" after all of them.
    const uint32_t seq = target->seq;
    __atomic_store_n(&target->seq, seq + 1, __ATOMIC_RELAXED);
#if defined(__SANITIZE_THREAD__)
    // ThreadSanitizer does not model standalone fences; a seq_cst store orders the same here.
    __atomic_store_n(&target->seq, seq + 1, __ATOMIC_SEQ_CST);
#else
    __atomic_thread_fence(__ATOMIC_RELEASE);
#endif
    target->generation = generation;
    target->key_hash = hash;
    target->expires_ms = now_ms + int64_t{ttl} * 1000;
    target->key_len = static_cast<uint16_t>(key.size());
    target->status = status;
    target->ttl = ttl;
    target->payload_len = static_cast<uint32_t>(payload.size());
    auto* data = reinterpret_cast<uint8_t*>(target + 1);
    std::memcpy(data, key.data(), key.size());
    copy_bytes(data + key.size(), payload.data(), payload.size());
    store_release(target->seq, seq + 2);
}

void HostsMap::invalidate_all() {
    if (base_ != nullptr) __atomic_add_fetch(&header_of(base_)->generation, 1, __ATOMIC_RELEASE);
}

void HostsMap::close() {
    if (base_ == nullptr) return;
    store_release(header_of(base_)->live, 0);
    munmap(base_, size_);
    base_ = nullptr;
    ::close(fd_);
    fd_ = -1;
}

}  // namespace nscache::nssd
