#include "server/hosts_map.h"

#include "common/bytes.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

namespace nscache::server {
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

std::optional<std::string> HostsMap::create(const std::string& path, uint32_t slots) {
    path_ = path;
    slot_count_ = slots;
    size_ = sizeof(nscache_map_header) + size_t{slots} * NSCACHE_MAP_SLOT_SIZE;
    // Built under a temporary name and renamed, so a reader never maps a half-made file.
    const std::string tmp = path + ".new";
    unlink(tmp.c_str());
    const int fd = open(tmp.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return "cannot create " + tmp + ": " + std::strerror(errno);
    fchmod(fd, 0644);  // world-readable whatever the umask, as nscd's shared database
    if (ftruncate(fd, static_cast<off_t>(size_)) != 0) {
        const std::string error = std::strerror(errno);
        ::close(fd);
        unlink(tmp.c_str());
        return "cannot size " + tmp + ": " + error;
    }
    base_ = mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    ::close(fd);
    if (base_ == MAP_FAILED) {
        base_ = nullptr;
        unlink(tmp.c_str());
        return "cannot map " + tmp + ": " + std::strerror(errno);
    }
    nscache_map_header* h = header_of(base_);
    h->magic = NSCACHE_MAP_MAGIC;
    h->version = NSCACHE_NSS_VERSION;
    h->slot_count = slots;
    h->slot_size = NSCACHE_MAP_SLOT_SIZE;
    h->generation = 1;
    store_release(h->live, 1);
    if (rename(tmp.c_str(), path.c_str()) != 0) {
        const std::string error = std::strerror(errno);
        munmap(base_, size_);
        base_ = nullptr;
        unlink(tmp.c_str());
        return "cannot rename " + tmp + " to " + path + ": " + error;
    }
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
    unlink(path_.c_str());
}

}  // namespace nscache::server
