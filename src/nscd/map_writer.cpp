// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/map_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "nscd/running_guard.h"

namespace nscache::nscd {
namespace {

template <typename T>
void store_release(T& target, T value) {
    __atomic_store_n(&target, value, __ATOMIC_RELEASE);
}

// Clients check the timestamp only while nscd_certainly_running is 0. Once the running
// guard holds the flag, the timestamp is set to 1 (long past): if the process dies, the
// kernel clears the flag and every client drops the map at once. Until then (a new map's
// first moments; a system where the guard cannot work) the heartbeat keeps a timestamp that
// turns stale this long after the last beat. The client's test is `timestamp + 300 <
// time()`, so the stamp written is backdated by 300 - kStaleAfter.
constexpr uint64_t kStaleAfterS = 5;
constexpr uint64_t kLongPast = 1;
// How long open() waits for the guard threads to point at the first map.
constexpr int kGuardWaitMs = 100;

// Every nscd reply header starts with int32 version, int32 found; 0 is "not found" (-1 the
// declined reply, never published).
bool is_not_found(std::span<const uint8_t> response) {
    int32_t found = -1;
    if (response.size() < 2 * sizeof found) return false;
    std::memcpy(&found, response.data() + sizeof found, sizeof found);
    return found == 0;
}

// Where the running guard points while no map should be touched.
int32_t g_unguarded_flag = 0;

}  // namespace

MapFile::~MapFile() {
    if (base_ != nullptr) munmap(base_, map_size_);
    if (reader_fd_ >= 0) close(reader_fd_);
    if (fd_ >= 0) close(fd_);
}

// The map is a sealed memfd, as the NSS module's map is: it has no path anybody could replace,
// truncate (SIGBUS in every reader) or write. F_SEAL_FUTURE_WRITE keeps this writable mapping
// and refuses every later one, to anybody, also through /proc/PID/fd. nscd uses an unlinked
// file under /var/run/nscd instead, which AppArmor's nameservice abstraction names
// (/{,var/}run/nscd/db*): a program confined by a profile that allows only that path cannot
// map a memfd, and then simply asks the socket (same answers, without the shared-memory
// speed). A file would need a folder the unprivileged daemon can create files in at every
// rotation, which root would later have to trust at the next start; the memfd needs none.
std::optional<std::string> MapFile::create(uint32_t module, uint32_t data_size, uint32_t nl_stamp,
                                           uint64_t now_s) {
    const size_t buckets_bytes = round_up(size_t{module} * sizeof(uint32_t), kAlign);
    map_size_ = sizeof(MapHead) + buckets_bytes + data_size;
    fd_ = memfd_create("nscache-nscd-hosts", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd_ < 0) return std::string("cannot create the nscd map: ") + std::strerror(errno);
    if (ftruncate(fd_, static_cast<off_t>(map_size_)) != 0) {
        return std::string("cannot size the nscd map: ") + std::strerror(errno);
    }
    base_ = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_SHARED, fd_, 0);
    if (base_ == MAP_FAILED) {
        base_ = nullptr;
        return std::string("cannot map the nscd map: ") + std::strerror(errno);
    }
    if (fcntl(fd_, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) !=
        0) {
        return std::string("cannot seal the nscd map: ") + std::strerror(errno);
    }
    // Readers get a descriptor opened read-only, as nscd hands out.
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    reader_fd_ = ::open(self.c_str(), O_RDONLY | O_CLOEXEC);
    if (reader_fd_ < 0) reader_fd_ = fcntl(fd_, F_DUPFD_CLOEXEC, 0);  // sealed all the same
    data_ = static_cast<uint8_t*>(base_) + sizeof(MapHead) + buckets_bytes;
    data_size_ = data_size;
    MapHead* h = head();
    h->version = kDbVersion;
    h->header_size = sizeof(MapHead);
    h->gc_cycle = 0;
    h->nscd_certainly_running = 0;
    h->timestamp = now_s - (kMappingTimeout - kStaleAfterS);
    h->extra_data[0] = nl_stamp;
    h->module = static_cast<int32_t>(module);
    h->data_size = static_cast<int32_t>(data_size);
    uint32_t* b = buckets();
    for (uint32_t i = 0; i < module; ++i) b[i] = kEndRef;
    return std::nullopt;
}

std::optional<uint32_t> MapFile::allocate(uint32_t bytes) {
    if (bytes > data_size_ - first_free_) return std::nullopt;
    const uint32_t at = first_free_;
    first_free_ += bytes;
    head()->first_free = static_cast<int32_t>(first_free_);
    return at;
}

void MapFile::retire() {
    if (base_ == nullptr) return;
    store_release(head()->nscd_certainly_running, 0);
    store_release(head()->timestamp, uint64_t{0});
}

uint32_t bucket_count_for(size_t entries, uint32_t most) {
    auto prime = [](uint32_t n) {
        if (n < 2) return false;
        for (uint32_t d = 2; d * d <= n; ++d) {
            if (n % d == 0) return false;
        }
        return true;
    };
    if (most <= kMinBuckets) return most;
    uint32_t n = static_cast<uint32_t>(std::clamp<size_t>(entries, kMinBuckets, most));
    while (n < most && !prime(n)) ++n;
    return n;
}

uint32_t MapWriter::module_for(size_t live) const {
    if (!expected_) return options_.module;
    // The files' keys not asked yet plus the records beyond the files live now (module
    // answers, not-found records) are at most expected + live: counting the files' records
    // twice costs at most twice the buckets, fewer would lengthen the chains.
    return bucket_count_for(*expected_ + live, options_.module);
}

uint32_t MapWriter::size_for(size_t bytes) const {
    constexpr size_t kStep = 64 * 1024;
    const size_t most = options_.data_size;
    const size_t least = std::min<size_t>(options_.min_data_size, most);
    return static_cast<uint32_t>(std::clamp(round_up(2 * bytes, kStep), least, most));
}

std::unique_ptr<MapFile> MapWriter::new_map(uint64_t now_s, uint32_t data_size, uint32_t module,
                                            std::string& error) {
    auto map = std::make_unique<MapFile>();
    if (auto e = map->create(module, data_size, nl_stamp_, now_s)) {
        error = *e;
        return nullptr;
    }
    return map;
}

FlagGuard& MapWriter::running_guard() const {
    return options_.guard != nullptr ? *options_.guard : RunningGuard::instance();
}

MapWriter::~MapWriter() {
    unguard();
}

void MapWriter::guard(MapFile& map, bool wait) {
    if (!options_.certainly_running) return;
    FlagGuard& g = running_guard();
    guard_generation_ = g.guard(&map.head()->nscd_certainly_running);
    // A rotation runs on the thread that answers every client: it never waits. Until the
    // guard threads point at the new map (microseconds, as a rule) its timestamp keeps it
    // fresh for kStaleAfterS, and the heartbeat sets it long past once they do.
    if ((wait && g.wait_acked(guard_generation_, kGuardWaitMs)) || g.acked() >= guard_generation_) {
        store_release(map.head()->timestamp, kLongPast);
    }
}

void MapWriter::unguard() {
    if (!options_.certainly_running || guard_generation_ == 0) return;
    FlagGuard& g = running_guard();
    guard_generation_ = g.guard(&g_unguarded_flag);
    g.wait_acked(guard_generation_, 2000);
}

std::optional<std::string> MapWriter::open(uint64_t now_s) {
    std::string error;
    current_ = new_map(now_s, size_for(0), module_for(0), error);
    if (!current_) return error;
    guard(*current_, true);  // at start, before any client
    return std::nullopt;
}

std::string MapWriter::index_key(RequestType type, std::span<const uint8_t> key) {
    std::string k(1, static_cast<char>(type));
    k.append(reinterpret_cast<const char*>(key.data()), key.size());
    return k;
}

std::optional<MapWriter::Entry> MapWriter::place(MapFile& map, RequestType type,
                                                 std::span<const uint8_t> key,
                                                 std::span<const uint8_t> block) {
    const auto block_bytes = static_cast<uint32_t>(block.size());
    const auto data_ref = map.allocate(block_bytes);
    if (!data_ref) return std::nullopt;
    const auto hash_ref = map.allocate(sizeof(HashEntry));
    if (!hash_ref) return std::nullopt;
    // Fresh memory that no reader can reach yet: plain stores.
    std::memcpy(map.data() + *data_ref, block.data(), block.size());
    const auto* dh = reinterpret_cast<const DataHead*>(block.data());
    HashEntry he{};
    he.type = static_cast<uint8_t>(type);
    he.first = 1;
    he.len = static_cast<int32_t>(key.size());
    he.key =
        *data_ref + static_cast<uint32_t>(sizeof(DataHead)) + static_cast<uint32_t>(dh->recsize);
    he.owner = 0;
    he.packet = *data_ref;
    Entry e;
    e.hash_ref = *hash_ref;
    e.data_ref = *data_ref;
    e.bytes = block_bytes;
    e.bucket = key_hash(key.data(), key.size()) % static_cast<uint32_t>(map.head()->module);
    uint32_t& head = map.buckets()[e.bucket];
    he.next = __atomic_load_n(&head, __ATOMIC_RELAXED);
    std::memcpy(map.data() + *hash_ref, &he, sizeof he);
    // Publication: everything above becomes visible to a reader that sees the new head.
    store_release(head, *hash_ref);
    map.head()->nentries += 1;
    return e;
}

void MapWriter::unlink(MapFile& map, const Entry& entry) {
    auto* dh = reinterpret_cast<DataHead*>(map.data() + entry.data_ref);
    store_release(dh->usable, uint8_t{0});
    // A reader standing on the entry goes on through its `next`, which never changes: the
    // entry's memory is not written again while this map lives.
    uint32_t* link = &map.buckets()[entry.bucket];
    for (;;) {
        const uint32_t at = *link;
        if (at == kEndRef) return;
        auto* he = reinterpret_cast<HashEntry*>(map.data() + at);
        if (at == entry.hash_ref) {
            store_release(*link, he->next);
            map.head()->nentries -= 1;
            return;
        }
        link = &he->next;
    }
}

bool MapWriter::publish(RequestType type, std::span<const uint8_t> key,
                        std::span<const uint8_t> response, uint32_t ttl_s, uint64_t now_ms,
                        uint64_t now_s) {
    if (!current_ || ttl_s == 0 || key.empty() || key.size() > kMaxKeyLen) return false;
    const size_t recsize = response.size();
    const size_t total = round_up(sizeof(DataHead) + recsize + key.size(), kBlockAlign);
    if (total + sizeof(HashEntry) > options_.data_size / 4) return false;
    std::string k = index_key(type, key);
    const uint64_t expires_ms = now_ms + uint64_t{ttl_s} * 1000;
    auto it = index_.find(k);
    if (it != index_.end()) {
        Entry& e = it->second;
        const auto* old = reinterpret_cast<const DataHead*>(current_->data() + e.data_ref);
        if (static_cast<size_t>(old->recsize) == recsize &&
            std::memcmp(old + 1, response.data(), recsize) == 0) {
            // Unchanged: clients need nothing new. (They never read a record's timeout: the
            // writer retires it.)
            if (expires_ms > e.expires_ms) {
                auto node = due_.extract(Due{e.expires_ms, e.serial});
                e.expires_ms = expires_ms;
                if (node) {
                    node.key() = Due{e.expires_ms, e.serial};
                    due_.insert(std::move(node));
                }
            }
            return true;
        }
    }
    const bool negative = is_not_found(response);
    if (negative && options_.max_negative != 0 && negatives_ >= options_.max_negative &&
        (it == index_.end() || !it->second.negative)) {
        ++refused_negatives_;
        // A found record this answer contradicts must not stay behind, authoritative to every
        // client until its TTL: without one the client asks the socket.
        if (it != index_.end()) remove(type, key);
        return false;
    }
    std::vector<uint8_t> block(total, 0);
    DataHead dh{};
    dh.allocsize = static_cast<int32_t>(total);
    dh.recsize = static_cast<int32_t>(recsize);
    dh.timeout = now_s + ttl_s;
    dh.notfound = 0;
    dh.usable = 1;
    dh.ttl = ttl_s;
    std::memcpy(block.data(), &dh, sizeof dh);
    std::memcpy(block.data() + sizeof dh, response.data(), recsize);
    std::memcpy(block.data() + sizeof dh + recsize, key.data(), key.size());

    std::optional<Entry> placed = place(*current_, type, key, block);
    if (!placed) {
        if (last_full_rotation_ms_ &&
            now_ms < *last_full_rotation_ms_ + options_.min_rotation_interval_ms) {
            ++deferred_rotations_;  // the earlier record, if any, stays
            return false;
        }
        last_full_rotation_ms_ = now_ms;
        if (!rotate(now_s, true, size_for(live_bytes_ + total + sizeof(HashEntry)))) return false;
        placed = place(*current_, type, key, block);
        if (!placed) {
            // Even the live records fill the map: start again from nothing.
            if (!rotate(now_s, false, options_.data_size)) return false;
            placed = place(*current_, type, key, block);
            if (!placed) return false;
        }
        it = index_.find(k);  // the rotation rebuilt the index
    }
    placed->expires_ms = expires_ms;
    placed->serial = next_serial_++;
    placed->negative = negative;
    negatives_ += negative ? 1 : 0;
    live_bytes_ += placed->bytes + sizeof(HashEntry);
    if (it != index_.end()) {
        unlink(*current_, it->second);  // after the new one is in place: never a gap
        due_.erase(Due{it->second.expires_ms, it->second.serial});
        live_bytes_ -= it->second.bytes + sizeof(HashEntry);
        negatives_ -= it->second.negative ? 1 : 0;
        it->second = *placed;
    } else {
        it = index_.emplace(k, *placed).first;
    }
    due_.emplace(Due{placed->expires_ms, placed->serial}, std::move(k));
    // Records beyond what the files said (a directory's users behind `files`): chains past two
    // entries a bucket cost a lookup more probes, so a larger array is made, as a full map's
    // rotation is (at most once per interval; each at least doubles the buckets).
    const auto module = static_cast<uint32_t>(current_->head()->module);
    if (expected_ && module < options_.module && index_.size() > 2 * size_t{module} &&
        (!last_full_rotation_ms_ ||
         now_ms >= *last_full_rotation_ms_ + options_.min_rotation_interval_ms)) {
        last_full_rotation_ms_ = now_ms;
        rotate(now_s, true, size_for(live_bytes_));
    }
    return true;
}

uint64_t MapWriter::expire(uint64_t now_ms) {
    while (!due_.empty() && due_.begin()->first.first <= now_ms) {
        auto d = due_.begin();
        auto it = index_.find(d->second);
        if (it != index_.end() && it->second.serial == d->first.second) {
            unlink(*current_, it->second);
            live_bytes_ -= it->second.bytes + sizeof(HashEntry);
            negatives_ -= it->second.negative ? 1 : 0;
            index_.erase(it);
            if (dropped_) dropped_(d->second);
        }
        due_.erase(d);
    }
    return due_.empty() ? 0 : due_.begin()->first.first;
}

void MapWriter::remove(RequestType type, std::span<const uint8_t> key) {
    const std::string k = index_key(type, key);
    auto it = index_.find(k);
    if (it == index_.end()) return;
    unlink(*current_, it->second);
    due_.erase(Due{it->second.expires_ms, it->second.serial});
    live_bytes_ -= it->second.bytes + sizeof(HashEntry);
    negatives_ -= it->second.negative ? 1 : 0;
    index_.erase(it);
    if (dropped_) dropped_(k);
}

uint64_t MapWriter::expiry_of(RequestType type, std::span<const uint8_t> key) const {
    auto it = index_.find(index_key(type, key));
    return it == index_.end() ? 0 : it->second.expires_ms;
}

bool MapWriter::rotate(uint64_t now_s, bool keep_records, uint32_t data_size) {
    std::string error;
    std::unique_ptr<MapFile> next =
        new_map(now_s, data_size, module_for(keep_records ? index_.size() : 0), error);
    if (!next) return false;
    std::unordered_map<std::string, Entry> kept;
    bool full = false;
    size_t kept_bytes = 0;
    size_t kept_negatives = 0;
    if (keep_records) {
        for (const auto& [k, e] : index_) {
            const auto type = static_cast<RequestType>(static_cast<uint8_t>(k[0]));
            const std::span<const uint8_t> key(reinterpret_cast<const uint8_t*>(k.data()) + 1,
                                               k.size() - 1);
            auto placed =
                full ? std::nullopt
                     : place(*next, type, key,
                             std::span<const uint8_t>(current_->data() + e.data_ref, e.bytes));
            if (!placed) {  // dropped: so is its place in the expiry queue, and what callers keep
                full = true;
                due_.erase(Due{e.expires_ms, e.serial});
                if (dropped_) dropped_(k);
                continue;
            }
            placed->expires_ms = e.expires_ms;
            placed->serial = e.serial;
            placed->negative = e.negative;
            kept_negatives += e.negative ? 1 : 0;
            kept_bytes += placed->bytes + sizeof(HashEntry);
            kept.emplace(k, *placed);
        }
    }
    // The new map is complete before anyone is sent to it; then the old one says "stale"
    // (after the guard left it: nothing sets its flag again).
    std::unique_ptr<MapFile> old = std::move(current_);
    current_ = std::move(next);
    guard(*current_, false);
    old->retire();
    if (options_.certainly_running) retired_.emplace_back(guard_generation_, std::move(old));
    // Starting from nothing (a flush, or live records that fill even a new map): every record
    // leaves. The same walk as copying them would be, on the same thread.
    if (!keep_records && dropped_) {
        for (const auto& entry : index_) dropped_(entry.first);
    }
    index_ = std::move(kept);
    live_bytes_ = kept_bytes;
    negatives_ = kept_negatives;
    if (!keep_records) due_.clear();
    ++rotations_;
    return true;
}

void MapWriter::flush(uint64_t now_s) {
    rotate(now_s, false, size_for(0));
}

void MapWriter::heartbeat(uint64_t now_s) {
    const uint64_t acked = options_.certainly_running ? running_guard().acked() : 0;
    if (current_) {
        const bool certain = options_.certainly_running && acked >= guard_generation_;
        store_release(current_->head()->timestamp,
                      certain ? kLongPast : now_s - (kMappingTimeout - kStaleAfterS));
    }
    std::erase_if(retired_, [acked](const auto& r) { return r.first <= acked; });
}

bool MapWriter::settle() {
    if (!options_.certainly_running || !current_) return true;
    if (running_guard().acked() < guard_generation_) return false;
    store_release(current_->head()->timestamp, kLongPast);
    return true;
}

void MapWriter::set_netlink_stamp(uint32_t stamp) {
    nl_stamp_ = stamp;
    if (current_) store_release(current_->head()->extra_data[0], stamp);
}

void MapWriter::shutdown() {
    // The guard first: once it points elsewhere, nothing sets the flag again.
    unguard();
    retired_.clear();
    if (current_) current_->retire();
}

}  // namespace nscache::nscd
