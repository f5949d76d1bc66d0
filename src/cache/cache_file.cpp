// SPDX-License-Identifier: BSD-3-Clause
#include "cache/cache_file.h"

#include "cache/nxdomain_cut.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

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

// An entry read back, checked by parsing it as the DNS message it was cut from.
struct LoadedEntry {
    EntrySnapshot snapshot;
    uint64_t born_wall_ms = 0;
};

bool read_entry(Reader& r, uint32_t version, const TtlPolicy& policy, LoadedEntry& out) {
    EntrySnapshot& e = out.snapshot;
    PreparedAnswer& a = e.answer;
    const uint8_t name_len = r.u8();
    const uint8_t* name = r.take(name_len);
    e.qtype = r.u16();
    e.qclass = r.u16();
    e.key_flags = r.u8();
    const uint8_t kind = r.u8();
    a.rcode = r.u8();
    a.ad = r.u8() != 0;
    a.ancount = r.u16();
    a.nscount = r.u16();
    a.arcount = r.u16();
    a.ttl = r.u32();
    out.born_wall_ms = r.u64();
    const uint16_t records_len = r.u16();
    const uint8_t* records = r.take(records_len);
    const uint16_t ttl_count = r.u16();
    if (!r.ok() || name_len == 0 || kind > static_cast<uint8_t>(AnswerKind::ServFail) ||
        a.rcode > 15 || e.key_flags > (kKeyDo | kKeyCd)) {
        return false;
    }
    a.kind = static_cast<AnswerKind>(kind);
    e.name.assign(name, name + name_len);
    a.records.assign(records, records + records_len);
    a.ttl_offsets.resize(ttl_count);
    for (auto& off : a.ttl_offsets) off = r.u16();
    if (version >= 2) {
        const uint8_t ede_len = r.u8();
        const uint8_t* ede = r.take(ede_len);
        if (!r.ok()) return false;
        a.ede.assign(ede, ede + ede_len);
        // Well-formed EDE options and nothing else, as prepare_answer keeps them.
        std::vector<uint8_t> checked;
        if (!dns::copy_ede_options(dns::Bytes(a.ede), checked) || checked != a.ede) return false;
    }
    if (!r.ok()) return false;

    // Rebuild the message and let the response scanner judge it.
    std::vector<uint8_t> msg(dns::kHeaderSize);
    dns::Header h;
    h.flags = static_cast<uint16_t>(dns::flag::QR | (a.ad ? dns::flag::AD : 0) | a.rcode);
    h.qdcount = 1;
    h.ancount = a.ancount;
    h.nscount = a.nscount;
    h.arcount = a.arcount;
    dns::write_header(msg.data(), h);
    msg.insert(msg.end(), e.name.begin(), e.name.end());
    const size_t qtail = msg.size();
    msg.resize(qtail + 4);
    dns::write_u16(&msg[qtail], e.qtype);
    dns::write_u16(&msg[qtail + 2], e.qclass);
    const size_t records_at = msg.size();
    msg.insert(msg.end(), a.records.begin(), a.records.end());
    auto qname = dns::skip_uncompressed_name(dns::Bytes(msg), dns::kHeaderSize);
    if (!qname || qname->end != qtail) return false;
    dns::ScannedResponse scan;
    if (!dns::scan_response(dns::Bytes(msg), scan) || scan.has_opt ||
        scan.records_end != msg.size() || scan.records.size() != a.ttl_offsets.size()) {
        return false;
    }
    for (size_t i = 0; i < scan.records.size(); ++i) {
        if (scan.records[i].ttl_offset - records_at != a.ttl_offsets[i]) return false;
    }
    // The TTL rules again, as for an upstream answer: the file may come from a daemon with
    // other limits (or from someone else), and max-ttl must hold for what it brings.
    auto prepared = prepare_answer(dns::Bytes(msg), scan, policy);
    if (!prepared || prepared->kind != a.kind) return false;
    if (a.kind == AnswerKind::ServFail) prepared->ttl = std::min(prepared->ttl, a.ttl);
    prepared->ede = std::move(a.ede);  // the rebuilt message has no OPT to carry them
    a = std::move(*prepared);
    return true;
}

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
            slice.clear();
            cache.snapshot_slice(shard, s, now_ms, slice);
            for (const auto& e : slice) {
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
                                  const TtlPolicy& policy, uint64_t now_ms, uint64_t wall_now_ms) {
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
    if (std::memcmp(magic, kTrailerMagic, 4) != 0 ||
        fnv1a(data, size - kTrailerBytes) != checksum) {
        return Error{"truncated or corrupt (checksum mismatch)"};
    }
    std::vector<LoadedEntry> entries;
    Reader r(data + kHeaderBytes, size - kHeaderBytes - kTrailerBytes);
    while (!r.at_end()) {
        LoadedEntry e;
        if (!read_entry(r, version, policy, e)) {
            return Error{"corrupt entry " + std::to_string(entries.size() + 1)};
        }
        entries.push_back(std::move(e));
    }
    if (entries.size() != count) {
        return Error{"entry count mismatch"};
    }
    uint64_t inserted = 0;
    for (const LoadedEntry& e : entries) {
        const uint64_t age_ms = wall_now_ms > e.born_wall_ms ? wall_now_ms - e.born_wall_ms : 0;
        if (age_ms >= uint64_t{e.snapshot.answer.ttl} * 1000) continue;  // expired since the dump
        const uint64_t born_ms = now_ms > age_ms ? now_ms - age_ms : 0;
        const auto& s = e.snapshot;
        if (s.qtype == kNxdomainMarkerType) continue;  // never stored: see nxdomain_cut.h
        cache.insert_at(CacheKey{dns::Bytes(s.name), s.qtype, s.qclass, s.key_flags}, s.answer,
                        born_ms, now_ms);
        ++inserted;
    }
    return inserted;
}

Result<uint64_t> load_cache_fd(Cache& cache, int fd, const TtlPolicy& policy, uint64_t now_ms,
                               uint64_t wall_now_ms) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 0 ||
        static_cast<uint64_t>(st.st_size) > kMaxFileBytes) {
        return Error{"not a regular file of a sane size"};
    }
    std::vector<uint8_t> bytes(static_cast<size_t>(st.st_size));
    size_t done = 0;
    // pread: from offset 0 whatever the descriptor's offset, which is left as it was.
    while (done < bytes.size()) {
        const ssize_t n =
            pread(fd, bytes.data() + done, bytes.size() - done, static_cast<off_t>(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        done += static_cast<size_t>(n);
    }
    if (done != bytes.size()) {
        return Error{"cannot read the cache file (it shrank or a read failed)"};
    }
    return load_cache_bytes(cache, bytes.data(), bytes.size(), policy, now_ms, wall_now_ms);
}

Result<uint64_t> load_cache(Cache& cache, const std::string& path, const TtlPolicy& policy,
                            uint64_t now_ms, uint64_t wall_now_ms) {
    // O_NOFOLLOW: a symlink is refused, not read through; O_NONBLOCK: a FIFO planted there
    // cannot hold the control thread in open().
    const ScopedFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (fd.get() < 0) {
        return Error{errno == ELOOP ? path + " is a symbolic link: refused"
                                    : "cannot open " + path + ": " + errno_text()};
    }
    Result<uint64_t> loaded = load_cache_fd(cache, fd.get(), policy, now_ms, wall_now_ms);
    if (!loaded) return Error{path + ": " + loaded.error()};
    return loaded;
}

}  // namespace nscache::cache
