// SPDX-License-Identifier: BSD-3-Clause
// The nscd hosts map: a file in glibc's nscd layout (nscd/protocol.h) that every process's
// built-in nscd client maps read-only and searches with no lock and no system call. This is
// its only writer (the host front's thread, front/host_front.h), and it never lets a reader in
// another process see a torn, moved or reused record:
//  - a record and its hash entry are written in fresh memory nobody has seen, then published
//    by one release store of the bucket head (new entries go first in their chain, so the
//    newest answer for a key wins);
//  - a record is retired by one byte (usable = 0) and unlinked by one release store of its
//    predecessor's link; its memory is never written again;
//  - freed memory is never reused: when the data area is spent, the live records are copied
//    into a new map (rotation), GETFDHST hands out the new one, and the old head's timestamp
//    becomes 0, which sends every client back for the new map on its next call;
//  - gc_cycle stays even: nothing ever moves in place;
//  - nscd_certainly_running is 1 while this process lives and 0 the moment it dies, however
//    it dies (running_guard.h); the timestamp then says "stale": clients drop the map at once.
// Expiry is exact: a record is retired when its TTL runs out (the thread's timer calls
// expire()), not on a prune cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "nscd/protocol.h"
#include "nscd/running_guard.h"

namespace nscache::nscd {

// One map file: a sealed memfd mapped read-write here, of a fixed size.
class MapFile {
  public:
    ~MapFile();
    // An error message on failure.
    std::optional<std::string> create(uint32_t module, uint32_t data_size, uint32_t nl_stamp,
                                      uint64_t now_s);
    // The read-only descriptor to hand out, and the size a client maps.
    int reader_fd() const { return reader_fd_; }
    uint64_t map_size() const { return map_size_; }

    MapHead* head() const { return static_cast<MapHead*>(base_); }
    uint32_t* buckets() const { return reinterpret_cast<uint32_t*>(head() + 1); }
    uint8_t* data() const { return data_; }
    uint32_t data_size() const { return data_size_; }
    // `bytes` (a multiple of kBlockAlign) of never-used memory; nullopt when spent.
    std::optional<uint32_t> allocate(uint32_t bytes);
    // Tells clients this map is stale (timestamp 0): they ask for the current one.
    void retire();

  private:
    int fd_ = -1;
    int reader_fd_ = -1;
    void* base_ = nullptr;
    uint64_t map_size_ = 0;
    uint8_t* data_ = nullptr;
    uint32_t data_size_ = 0;
    uint32_t first_free_ = 0;
};

// The bucket count of a map expected to hold `entries` hash entries: the smallest prime at or
// above max(kMinBuckets, entries), at most `most` (a prime). A chain of about one entry a bucket
// keeps a lookup at one probe, and a small database's array stays in the level-1 cache (nscd's
// default suggested-size, 211 buckets, is 844 bytes; 32749 are 128 KiB, which cost glibc's
// client a cache miss a lookup on a database of 318 services: bench/RESULTS.md).
constexpr uint32_t kMinBuckets = 211;
uint32_t bucket_count_for(size_t entries, uint32_t most);

struct MapOptions {
    uint32_t module = 32749;  // buckets (a prime); with set_expected_entries, the most
    // The largest data area (nscd-map-size); the memfd is sparse, pages come as used. A new
    // map is sized to twice what it starts with, at least min_data_size (audit item 8: a
    // client that keeps a retired map's descriptor keeps its pages).
    uint32_t data_size = 32u << 20;
    // Keep nscd_certainly_running set while the process lives (running_guard.h).
    bool certainly_running = true;
    uint32_t min_data_size = 1u << 20;
    // A full map is rotated at most this often; meanwhile new records are not published (the
    // socket answers them). Replaced records fill a map, and any local user can have answers
    // replaced: unlimited, that is one new map (and one more a client may pin) per fill.
    uint64_t min_rotation_interval_ms = 2000;
    // The guard of nscd_certainly_running; null: RunningGuard::instance().
    FlagGuard* guard = nullptr;
    // At most this many not-found records (a reply whose `found` is 0) live at once; past it a
    // not-found is not published (the socket still answers it). Any local user can invent
    // names: unbounded, they fill the map and its index (review of issue 18, item 8). 0: no
    // bound (hosts, whose negatives expire with the DNS's TTLs).
    size_t max_negative = 0;
};

class MapWriter {
  public:
    explicit MapWriter(MapOptions options = {}) : options_(options) {}
    ~MapWriter();
    MapWriter(const MapWriter&) = delete;
    MapWriter& operator=(const MapWriter&) = delete;

    // Creates the first map. An error message on failure.
    std::optional<std::string> open(uint64_t now_s);
    const MapFile* current() const { return current_.get(); }

    // Publishes `response` (a reply as sent on the socket) for (type, key) until now_ms +
    // ttl_s (CLOCK_MONOTONIC ms). Replaces an earlier record of the key; the same response
    // again only moves its expiry (never earlier) and writes nothing: any local user can ask
    // the socket for a cached name as often as they like. False when it does not fit even in
    // an empty map.
    bool publish(RequestType type, std::span<const uint8_t> key, std::span<const uint8_t> response,
                 uint32_t ttl_s, uint64_t now_ms, uint64_t now_s);
    // Retires every record whose time is up; returns when the next one is due (or 0: none).
    uint64_t expire(uint64_t now_ms);
    // Retires the record of (type, key), if any.
    void remove(RequestType type, std::span<const uint8_t> key);
    // Forgets everything: a new empty map (INVALIDATE, a hosts file change, a cache flush).
    void flush(uint64_t now_s);
    // The staleness stamp clients check while the map is not certainly running (called once a
    // second); also lets go of maps no guard points at anymore.
    void heartbeat(uint64_t now_s);
    // After a rotation: once the guard points at the new map, sets its timestamp long past (a
    // killed daemon's map is then dropped at once, not kStaleAfterS later). False while the
    // guard does not point there yet: call again soon. Never waits.
    bool settle();
    void set_netlink_stamp(uint32_t stamp);
    // Sizes the bucket array of every map made from now on (open, flush, rotation) to
    // `entries`, the hash entries its database's files give, plus the records live at a
    // rotation; a map whose records outgrow two a bucket is rotated into a larger array.
    // nullopt (the default, hosts): options.module buckets always.
    void set_expected_entries(std::optional<size_t> entries) { expected_ = entries; }
    uint32_t buckets() const { return current_ ? uint32_t(current_->head()->module) : 0; }
    // On stop: clients drop the map at once and use NSS.
    void shutdown();

    size_t entries() const { return index_.size(); }
    uint64_t rotations() const { return rotations_; }
    // Publications refused because the map was full and rotated too recently.
    uint64_t deferred_rotations() const { return deferred_rotations_; }
    // Not-found records live now (exact: counted wherever a record enters or leaves), and the
    // not-found publications refused at max_negative.
    size_t negatives() const { return negatives_; }
    uint64_t refused_negatives() const { return refused_negatives_; }
    // Entries in the expiry queue.
    size_t pending_expiries() const { return due_.size(); }
    // When the record of (type, key) expires, or 0 when none is published.
    uint64_t expiry_of(RequestType type, std::span<const uint8_t> key) const;

    // (type, key) as the index names it: the type byte, then the key.
    static std::string index_key(RequestType type, std::span<const uint8_t> key);
    // Told the index key of each record that leaves the map other than by a newer record of
    // its key taking its place: expired, removed, dropped by a rotation, flushed. What a caller
    // keeps per record (the nscd protocol's prefetch timers) then lives no longer than the
    // record: any local user can have many distinct names published and then dropped. Called
    // from within publish(), expire(), remove() and flush(); it must not call the writer.
    using DropListener = std::function<void(const std::string& index_key)>;
    void set_drop_listener(DropListener listener) { dropped_ = std::move(listener); }

  private:
    struct Entry {
        uint32_t hash_ref = kEndRef;  // the HashEntry
        uint32_t data_ref = kEndRef;  // the DataHead
        uint32_t bytes = 0;           // the record block
        uint32_t bucket = 0;
        uint64_t expires_ms = 0;
        uint64_t serial = 0;    // which publication: a rotation keeps it, a replacement not
        bool negative = false;  // a not-found reply (counted in negatives_)
    };
    // An expiry-queue position: (expires_ms, serial), unique per live record.
    using Due = std::pair<uint64_t, uint64_t>;

    // Writes a record block copy and its hash entry into `map`, linked first in its bucket.
    std::optional<Entry> place(MapFile& map, RequestType type, std::span<const uint8_t> key,
                               std::span<const uint8_t> block);
    void unlink(MapFile& map, const Entry& entry);
    // A new map holding the live records; false if even that failed.
    bool rotate(uint64_t now_s, bool keep_records, uint32_t data_size);
    std::unique_ptr<MapFile> new_map(uint64_t now_s, uint32_t data_size, uint32_t module,
                                     std::string& error);
    // The data area for a map that starts holding `bytes`.
    uint32_t size_for(size_t bytes) const;
    // The bucket count of a new map that starts with `live` records.
    uint32_t module_for(size_t live) const;
    // Has the running guard point at `map`'s flag; once it does, the map's timestamp is set
    // long past, so that only the flag keeps the map trusted. Waits for it only if `wait`.
    void guard(MapFile& map, bool wait);
    // Points the running guard away from every map (before they are unmapped).
    void unguard();
    FlagGuard& running_guard() const;

    MapOptions options_;
    std::unique_ptr<MapFile> current_;
    // Replaced maps, kept mapped until the running guard points elsewhere (the kernel would
    // otherwise write into whatever reuses their addresses): (guard generation, map).
    std::vector<std::pair<uint64_t, std::unique_ptr<MapFile>>> retired_;
    uint64_t guard_generation_ = 0;
    uint64_t next_serial_ = 1;
    uint32_t nl_stamp_ = 1;
    uint64_t rotations_ = 0;
    uint64_t deferred_rotations_ = 0;
    std::optional<size_t> expected_;
    size_t negatives_ = 0;
    uint64_t refused_negatives_ = 0;
    std::optional<uint64_t> last_full_rotation_ms_;
    size_t live_bytes_ = 0;  // of the records in index_, with their hash entries
    std::unordered_map<std::string, Entry> index_;
    // One entry per record of index_, erased with it (a replaced record leaves nothing
    // behind): a client asking again and again cannot grow it.
    std::map<Due, std::string> due_;
    DropListener dropped_;
};

}  // namespace nscache::nscd
