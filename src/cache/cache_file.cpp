// SPDX-License-Identifier: BSD-3-Clause
#include "cache/cache_file.h"

#include "cache/nxdomain_cut.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <new>
#include <utility>
#include <vector>

#include "common/bytes.h"
#include "common/hash.h"
#include "dns/ede.h"
#include "dns/name.h"
#include "dns/response.h"
#include "dns/wire.h"

namespace nscache::cache {
namespace {

constexpr char kMagic[8] = {'N', 'S', 'C', 'A', 'C', 'H', 'E', '\0'};
// Version 2 adds each entry's Extended DNS Error options; version 1 files still load.
constexpr uint32_t kVersion = 2;
constexpr uint32_t kOldestVersion = 1;
constexpr char kTrailerMagic[4] = {'E', 'N', 'D', '\0'};
constexpr size_t kHeaderBytes = 8 + 4 + 4;
constexpr size_t kTrailerBytes = 4 + 8 + 8;
constexpr size_t kMaxFileBytes = size_t{16} << 30;

class Writer {
  public:
    void u8(uint8_t v) { bytes.push_back(v); }
    void u16(uint16_t v) {
        u8(static_cast<uint8_t>(v >> 8));
        u8(static_cast<uint8_t>(v));
    }
    void u32(uint32_t v) {
        u16(static_cast<uint16_t>(v >> 16));
        u16(static_cast<uint16_t>(v));
    }
    void u64(uint64_t v) {
        u32(static_cast<uint32_t>(v >> 32));
        u32(static_cast<uint32_t>(v));
    }
    void raw(const void* p, size_t n) {
        const auto* b = static_cast<const uint8_t*>(p);
        bytes.insert(bytes.end(), b, b + n);
    }
    std::vector<uint8_t> bytes;
};

class Reader {
  public:
    Reader(const uint8_t* data, size_t size) : data_(data), size_(size) {}
    bool ok() const { return ok_; }
    bool at_end() const { return pos_ == size_; }
    size_t pos() const { return pos_; }
    const uint8_t* take(size_t n) {
        if (!ok_ || size_ - pos_ < n) {
            ok_ = false;
            return nullptr;
        }
        const uint8_t* p = data_ + pos_;
        pos_ += n;
        return p;
    }
    uint8_t u8() {
        const uint8_t* p = take(1);
        return p ? p[0] : 0;
    }
    uint16_t u16() {
        const uint8_t* p = take(2);
        return p ? dns::read_u16(p) : 0;
    }
    uint32_t u32() {
        const uint8_t* p = take(4);
        return p ? dns::read_u32(p) : 0;
    }
    uint64_t u64() {
        const uint64_t hi = u32();
        return hi << 32 | u32();
    }

  private:
    const uint8_t* data_;
    size_t size_;
    size_t pos_ = 0;
    bool ok_ = true;
};

void write_entry(Writer& w, const EntrySnapshot& e, uint64_t now_ms, uint64_t wall_now_ms) {
    const PreparedAnswer& a = e.answer;
    w.u8(static_cast<uint8_t>(e.name.size()));
    w.raw(e.name.data(), e.name.size());
    w.u16(e.qtype);
    w.u16(e.qclass);
    w.u8(e.key_flags);
    w.u8(static_cast<uint8_t>(a.kind));
    w.u8(a.rcode);
    w.u8(a.ad ? 1 : 0);
    w.u16(a.ancount);
    w.u16(a.nscount);
    w.u16(a.arcount);
    w.u32(a.ttl);
    w.u64(wall_now_ms - (now_ms - e.born_ms));  // born, in wall-clock time
    w.u16(static_cast<uint16_t>(a.records.size()));
    w.raw(a.records.data(), a.records.size());
    w.u16(static_cast<uint16_t>(a.ttl_offsets.size()));
    for (uint16_t off : a.ttl_offsets) w.u16(off);
    const size_t ede = a.ede.size() <= kMaxEdeBytes ? a.ede.size() : 0;
    w.u8(static_cast<uint8_t>(ede));
    w.raw(a.ede.data(), ede);
}

// An entry as the file holds it: fields read, lengths within the file, nothing checked yet.
struct RawEntry {
    dns::Bytes name;
    uint16_t qtype = 0;
    uint16_t qclass = 0;
    uint8_t key_flags = 0;
    uint8_t kind = 0;
    uint8_t rcode = 0;
    bool ad = false;
    uint16_t ancount = 0;
    uint16_t nscount = 0;
    uint16_t arcount = 0;
    uint32_t ttl = 0;
    uint64_t born_wall_ms = 0;
    dns::Bytes records;
    const uint8_t* ttl_offsets = nullptr;  // ttl_count big-endian u16
    uint16_t ttl_count = 0;
    dns::Bytes ede;
};

bool read_raw_entry(Reader& r, uint32_t version, RawEntry& e) {
    const uint8_t name_len = r.u8();
    const uint8_t* name = r.take(name_len);
    e.qtype = r.u16();
    e.qclass = r.u16();
    e.key_flags = r.u8();
    e.kind = r.u8();
    e.rcode = r.u8();
    e.ad = r.u8() != 0;
    e.ancount = r.u16();
    e.nscount = r.u16();
    e.arcount = r.u16();
    e.ttl = r.u32();
    e.born_wall_ms = r.u64();
    const uint16_t records_len = r.u16();
    const uint8_t* records = r.take(records_len);
    e.ttl_count = r.u16();
    e.ttl_offsets = r.take(size_t{e.ttl_count} * 2);
    e.ede = {};
    if (version >= 2) {
        const uint8_t ede_len = r.u8();
        const uint8_t* ede = r.take(ede_len);
        if (r.ok()) e.ede = dns::Bytes(ede, ede_len);
    }
    if (!r.ok()) return false;
    e.name = dns::Bytes(name, name_len);
    e.records = dns::Bytes(records, records_len);
    return true;
}

// Buffers reused from one entry to the next: after the first few, checking an entry
// allocates nothing.
struct EntryChecker {
    std::vector<uint8_t> msg;
    dns::ScannedResponse scan;
    std::vector<uint8_t> ede_checked;
    PreparedAnswer answer;  // the entry, once checked: what the cache stores
};

// Checks an entry by parsing it as the DNS message it was cut from and preparing it again
// under this daemon's TTL rules; the result is in `c.answer`.
bool check_entry(const RawEntry& e, const TtlPolicy& policy, const DomainTtlCaps* caps,
                 EntryChecker& c) {
    if (e.name.empty() || e.kind > static_cast<uint8_t>(AnswerKind::ServFail) || e.rcode > 15 ||
        e.key_flags > (kKeyDo | kKeyCd)) {
        return false;
    }
    // Well-formed EDE options and nothing else, as prepare_answer keeps them.
    c.ede_checked.clear();
    if (!dns::copy_ede_options(e.ede, c.ede_checked) || c.ede_checked.size() != e.ede.size() ||
        !std::equal(e.ede.begin(), e.ede.end(), c.ede_checked.begin())) {
        return false;
    }

    // Rebuild the message and let the response scanner judge it.
    std::vector<uint8_t>& msg = c.msg;
    const size_t qtail = dns::kHeaderSize + e.name.size();
    const size_t records_at = qtail + 4;
    msg.resize(records_at + e.records.size());
    dns::Header h;
    h.flags = static_cast<uint16_t>(dns::flag::QR | (e.ad ? dns::flag::AD : 0) | e.rcode);
    h.qdcount = 1;
    h.ancount = e.ancount;
    h.nscount = e.nscount;
    h.arcount = e.arcount;
    dns::write_header(msg.data(), h);
    std::memcpy(&msg[dns::kHeaderSize], e.name.data(), e.name.size());
    dns::write_u16(&msg[qtail], e.qtype);
    dns::write_u16(&msg[qtail + 2], e.qclass);
    copy_bytes(&msg[records_at], e.records.data(), e.records.size());
    const dns::Bytes wire(msg);
    auto qname = dns::skip_uncompressed_name(wire, dns::kHeaderSize);
    if (!qname || qname->end != qtail) return false;
    dns::ScannedResponse& scan = c.scan;
    if (!dns::scan_response(wire, scan) || scan.has_opt || scan.records_end != msg.size() ||
        scan.records.size() != e.ttl_count) {
        return false;
    }
    for (size_t i = 0; i < scan.records.size(); ++i) {
        if (scan.records[i].ttl_offset - records_at != dns::read_u16(e.ttl_offsets + 2 * i)) {
            return false;
        }
    }
    // The TTL rules again, as for an upstream answer: the file may come from a daemon with
    // other limits (or from someone else), and max-ttl must hold for what it brings.
    PreparedAnswer& a = c.answer;
    TtlPolicy capped;
    const TtlPolicy* rules = &policy;
    if (caps != nullptr) {
        if (const DomainTtlCaps::Caps* own = caps->find(e.name)) {
            capped = DomainTtlCaps::capped(policy, *own);
            rules = &capped;
        }
    }
    if (!prepare_answer_into(wire, scan, *rules, a) || static_cast<uint8_t>(a.kind) != e.kind) {
        return false;
    }
    if (a.kind == AnswerKind::ServFail) a.ttl = std::min(a.ttl, e.ttl);
    a.ede.assign(e.ede.begin(), e.ede.end());  // the rebuilt message has no OPT to carry them
    return true;
}

// Inserts checked entries a batch at a time: the buckets of a batch are prefetched as its
// entries are checked and inserted only once the batch is full, so the bucket arrays' cache
// misses (one per insert, most of an insert's cost) overlap the checking.
class BatchInserter {
  public:
    struct Slot {
        RawEntry raw;
        EntryChecker checker;
        uint64_t hash = 0;
    };

    BatchInserter(Cache& cache, const LoadOptions& options, uint64_t now_ms, uint64_t wall_now_ms)
        : cache_(cache), options_(options), now_ms_(now_ms), wall_now_ms_(wall_now_ms) {}

    // Where the next entry is read and checked.
    Slot& next_slot() { return slots_[used_]; }

    // The slot from next_slot(), checked: kept (or dropped: expired, a marker, left out).
    void take(Slot& slot) {
        const RawEntry& raw = slot.raw;
        if (raw.qtype == kNxdomainMarkerType) return;  // never stored: see nxdomain_cut.h
        const uint64_t age_ms =
            wall_now_ms_ > raw.born_wall_ms ? wall_now_ms_ - raw.born_wall_ms : 0;
        if (age_ms >= uint64_t{slot.checker.answer.ttl} * 1000) return;  // expired since the dump
        if (options_.leave_out != nullptr && options_.leave_out->covers(raw.name)) return;
        slot.hash = cache_.hash_name(raw.name);
        cache_.prefetch_bucket(slot.hash);
        born_ms_[used_] = now_ms_ > age_ms ? now_ms_ - age_ms : 0;
        if (++used_ == kBatch) finish();
    }

    void finish() {
        for (size_t i = 0; i < used_; ++i) {
            const Slot& s = slots_[i];
            cache_.insert_loaded(
                CacheKey{s.raw.name, s.raw.qtype, s.raw.qclass, s.raw.key_flags, s.hash},
                s.checker.answer, born_ms_[i], now_ms_);
        }
        inserted_ += used_;
        used_ = 0;
    }

    uint64_t inserted() const { return inserted_; }

  private:
    static constexpr size_t kBatch = 16;
    Cache& cache_;
    const LoadOptions& options_;
    const uint64_t now_ms_;
    const uint64_t wall_now_ms_;
    Slot slots_[kBatch];
    uint64_t born_ms_[kBatch] = {};
    size_t used_ = 0;
    uint64_t inserted_ = 0;
};

bool write_all(int fd, const std::vector<uint8_t>& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = write(fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR) continue;
            return false;
        }
        done += static_cast<size_t>(n);
    }
    return true;
}

// The folder and last component of `path` ("/a/b" -> "/a", "b"; "b" -> ".", "b").
std::pair<std::string, std::string> split_path(const std::string& path) {
    const size_t slash = path.rfind('/');
    if (slash == std::string::npos) return {".", path};
    return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

// Closes a descriptor when the scope ends.
class ScopedFd {
  public:
    explicit ScopedFd(int fd) : fd_(fd) {}
    ~ScopedFd() {
        if (fd_ >= 0) close(fd_);
    }
    ScopedFd(const ScopedFd&) = delete;
    ScopedFd& operator=(const ScopedFd&) = delete;
    int get() const { return fd_; }

  private:
    int fd_;
};

std::string errno_text() {
    return std::strerror(errno);
}

}  // namespace

Result<uint64_t> dump_cache_fd(const Cache& cache, int fd, uint64_t now_ms, uint64_t wall_now_ms) {
    uint64_t entries = 0;
    uint64_t checksum_state = kFnv1aBasis;
    auto emit = [&](Writer& w) -> bool {
        checksum_state = fnv1a(w.bytes.data(), w.bytes.size(), checksum_state);
        const bool ok = write_all(fd, w.bytes);
        w.bytes.clear();
        return ok;
    };
    Writer w;
    w.raw(kMagic, sizeof kMagic);
    w.u32(kVersion);
    w.u32(0);
    bool ok = emit(w);
    std::vector<EntrySnapshot> slice;
    for (size_t shard = 0; ok && shard < cache.shard_count(); ++shard) {
        for (size_t s = 0; ok && s < cache.slices_per_shard(); ++s) {
            const size_t n = cache.snapshot_slice_reusing(shard, s, now_ms, slice);
            for (size_t i = 0; i < n; ++i) {
                const EntrySnapshot& e = slice[i];
                // A marker is rebuilt by the cache from its NXDOMAIN when that is loaded.
                if (e.qtype == kNxdomainMarkerType) continue;
                write_entry(w, e, now_ms, wall_now_ms);
                ++entries;
            }
            ok = emit(w);
        }
    }
    if (!ok) return Error{"cannot write the cache: " + errno_text()};
    w.raw(kTrailerMagic, sizeof kTrailerMagic);
    w.u64(entries);
    const uint64_t checksum = checksum_state;
    w.u64(checksum);
    if (!write_all(fd, w.bytes)) return Error{"cannot write the cache: " + errno_text()};
    return entries;
}

Result<uint64_t> dump_cache(const Cache& cache, const std::string& path, uint64_t now_ms,
                            uint64_t wall_now_ms) {
    const auto [folder_path, name] = split_path(path);
    if (name.empty() || name == "." || name == "..") {
        return Error{"not a file name: " + path};
    }
    // Everything below is relative to the folder opened once, so the temporary file, the
    // rename and the folder's fsync all happen in the same folder.
    const ScopedFd folder(open(folder_path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (folder.get() < 0) {
        return Error{"cannot open the folder of " + path + ": " + errno_text()};
    }
    // One fixed temporary name: a dump cut short by kill -9 leaves a file the next dump
    // replaces, instead of a new stray per process. The stale one is unlinked (a symlink
    // planted there goes, its target untouched) and the new one created exclusively without
    // following links, so the daemon (root, often) never writes through someone's link.
    const std::string tmp = name + ".tmp";
    if (unlinkat(folder.get(), tmp.c_str(), 0) != 0 && errno != ENOENT) {
        return Error{"cannot remove the stale " + path + ".tmp: " + errno_text()};
    }
    const int fd = openat(folder.get(), tmp.c_str(),
                          O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return Error{"cannot create " + path + ".tmp: " + errno_text()};
    }
    const Result<uint64_t> written = dump_cache_fd(cache, fd, now_ms, wall_now_ms);
    const bool ok = written.ok() && fsync(fd) == 0;
    const int saved_errno = errno;
    close(fd);
    // rename replaces whatever is at `path`, a symlink included, and never follows it.
    if (!ok || renameat(folder.get(), tmp.c_str(), folder.get(), name.c_str()) != 0) {
        Error error{"cannot write " + path + ": " + std::strerror(ok ? errno : saved_errno)};
        unlinkat(folder.get(), tmp.c_str(), 0);
        return error;
    }
    // The rename itself is durable only once the folder is synced.
    fsync(folder.get());
    return written;
}

Result<uint64_t> load_cache_bytes(Cache& cache, const uint8_t* data, size_t size,
                                  const TtlPolicy& policy, uint64_t now_ms, uint64_t wall_now_ms,
                                  const LoadOptions& options) {
    if (size < kHeaderBytes + kTrailerBytes || std::memcmp(data, kMagic, sizeof kMagic) != 0) {
        return Error{"not an nscache cache file"};
    }
    const uint32_t version = dns::read_u32(data + 8);
    if (version < kOldestVersion || version > kVersion) {
        return Error{"unsupported cache file version " + std::to_string(version)};
    }
    const uint8_t* trailer = data + size - kTrailerBytes;
    Reader tr(trailer, kTrailerBytes);
    const uint8_t* magic = tr.take(4);
    const uint64_t count = tr.u64();
    const uint64_t checksum = tr.u64();
    const Error bad_checksum{"truncated or corrupt (checksum mismatch)"};
    if (std::memcmp(magic, kTrailerMagic, 4) != 0) return bad_checksum;
    const uint8_t* const entries = data + kHeaderBytes;
    const size_t entries_size = size - kHeaderBytes - kTrailerBytes;
    BatchInserter inserter(cache, options, now_ms, wall_now_ms);
    // Most configurations cap nothing per rule: no lookup per entry then.
    const DomainTtlCaps* caps =
        options.ttl_caps != nullptr && !options.ttl_caps->empty() ? options.ttl_caps : nullptr;
    // A fault found midway empties a private cache: only right if nothing was in it before.
    const bool one_pass = options.cache_is_private && cache.counters().entries == 0;
    // One pass: the checksum is taken entry by entry as they are parsed, its serial chain of
    // multiplies overlapping the parsing (apart, it was a sixth of a million-entry load).
    uint64_t running = fnv1a(data, kHeaderBytes);
    auto fault = [&](Error error) -> Error {
        if (one_pass) {
            cache.flush();  // nobody saw what went in
            // A damaged file says so rather than which entry it broke.
            if (fnv1a(data, size - kTrailerBytes) != checksum) return bad_checksum;
        }
        return error;
    };
    if (!one_pass) {
        if (fnv1a(data, size - kTrailerBytes) != checksum) return bad_checksum;
        // Every entry is checked before any is inserted, so that workers never answer from
        // a file found faulty later; then each again, checked and prepared as it goes in.
        // Keeping a million checked answers for the second pass instead cost more than
        // checking them twice (a copy the size of the file, its pages zeroed and faulted in).
        EntryChecker checker;
        RawEntry raw;
        uint64_t seen = 0;
        for (Reader r(entries, entries_size); !r.at_end();) {
            ++seen;
            if (seen > count) return Error{"entry count mismatch"};
            if (!read_raw_entry(r, version, raw) || !check_entry(raw, policy, caps, checker)) {
                return Error{"corrupt entry " + std::to_string(seen)};
            }
        }
        if (seen != count) return Error{"entry count mismatch"};
    }
    uint64_t seen = 0;
    for (Reader r(entries, entries_size); !r.at_end();) {
        ++seen;
        if (seen > count) return fault(Error{"entry count mismatch"});
        BatchInserter::Slot& slot = inserter.next_slot();
        const size_t start = r.pos();
        if (!read_raw_entry(r, version, slot.raw)) {
            return fault(Error{"corrupt entry " + std::to_string(seen)});
        }
        if (one_pass) running = fnv1a(entries + start, r.pos() - start, running);
        if (!check_entry(slot.raw, policy, caps, slot.checker)) {
            return fault(Error{"corrupt entry " + std::to_string(seen)});
        }
        inserter.take(slot);
    }
    if (one_pass && running != checksum) return fault(bad_checksum);
    if (seen != count) return fault(Error{"entry count mismatch"});
    inserter.finish();
    return inserter.inserted();
}

Result<uint64_t> load_cache_fd(Cache& cache, int fd, const TtlPolicy& policy, uint64_t now_ms,
                               uint64_t wall_now_ms, const LoadOptions& options) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
        static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
        return Error{"not a regular file of a sane size"};
    }
    // Read, not mapped: a file truncated under a mapping faults (SIGBUS) on the next touch,
    // and whoever can write the state folder (or hands the memfd over) could do that. Not
    // zeroed first either: 100 MB for a million entries.
    const auto size = static_cast<size_t>(st.st_size);
    const std::unique_ptr<uint8_t[]> bytes(new (std::nothrow) uint8_t[size > 0 ? size : 1]);
    if (!bytes) return Error{"no memory for a cache file of " + std::to_string(size) + " bytes"};
    size_t done = 0;
    // pread: from offset 0 whatever the descriptor's offset, which is left as it was.
    while (done < size) {
        const ssize_t n = pread(fd, bytes.get() + done, size - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    if (done != size) {
        return Error{"cannot read the cache file (it shrank or a read failed)"};
    }
    return load_cache_bytes(cache, bytes.get(), size, policy, now_ms, wall_now_ms, options);
}

Result<uint64_t> load_cache(Cache& cache, const std::string& path, const TtlPolicy& policy,
                            uint64_t now_ms, uint64_t wall_now_ms, const LoadOptions& options) {
    // O_NOFOLLOW: a symlink is refused, not read through; O_NONBLOCK: a FIFO planted there
    // cannot hold the control thread in open().
    const ScopedFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) {
        return Error{errno == ELOOP ? path + " is a symbolic link: refused"
                                    : "cannot open " + path + ": " + errno_text()};
    }
    Result<uint64_t> loaded = load_cache_fd(cache, fd.get(), policy, now_ms, wall_now_ms, options);
    if (!loaded) return Error{path + ": " + loaded.error()};
    return loaded;
}

}  // namespace nscache::cache
