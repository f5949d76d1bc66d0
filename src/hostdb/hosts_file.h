// SPDX-License-Identifier: BSD-3-Clause
// /etc/hosts as glibc's `files` module reads it, parsed once per change: lookups by name
// (AF_INET, AF_INET6, or both as getaddrinfo asks) and by address, with /etc/host.conf's
// `multi` (merge every matching line, Debian's default) applied as glibc applies it.
// HostsTable is immutable after parse and may be read from any thread; HostsFile owns the
// inotify watch and belongs to one thread (its event loop's).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/event_loop.h"
#include "hostdb/host_answer.h"
#include "upstream/routing.h"

namespace nscache::hostdb {

// How long an answer from /etc/hosts is published for: any change to the file flushes it
// sooner (nscd keeps such answers for its positive-time-to-live, one hour by default).
inline constexpr uint32_t kHostsFileTtl = 3600;

class HostsTable {
  public:
    // `multi`: /etc/host.conf's "multi on": a lookup by name merges every matching line.
    static HostsTable parse(std::string_view text, bool multi);

    // family 2 (AF_INET), 10 (AF_INET6) or 0 (AF_UNSPEC, as getaddrinfo's
    // gethostbyname4_r: one address per matching line, both families, no aliases).
    std::optional<HostAnswer> by_name(std::string_view name, int family) const;
    // address: 4 bytes for family 2, 16 for family 10.
    std::optional<HostAnswer> by_addr(int family, const uint8_t* address) const;
    size_t lines() const { return lines_.size(); }
    // Every (name or alias, address) pair a DNS client may ask for, in file order: what the
    // DNS front answers from the hosts file (names DNS cannot carry are left out).
    std::vector<upstream::HostsEntry> dns_entries() const;

  private:
    struct Line {
        int family = 0;  // 2 or 10, as written
        std::array<uint8_t, 16> address{};
        std::string name;
        std::vector<std::string> aliases;
    };
    // The line's address as a lookup of `family` sees it (glibc turns ::1 and v4-mapped
    // IPv6 lines into IPv4 for AF_INET, and skips IPv4 lines for AF_INET6); false: skipped.
    static bool address_as(const Line& line, int family, uint8_t* out);

    std::vector<Line> lines_;
    std::unordered_map<std::string, std::vector<uint32_t>> by_name_;  // lower-cased name
    // The first line each address is found on, as by_addr's family sees it: one lookup per
    // reverse query instead of a pass over the file. Key: the family's byte, then the address.
    std::unordered_map<std::string, uint32_t> by_address_;
    bool multi_ = false;
};

// The hosts file at `path` as DNS answers it (every line counts, as with host.conf's multi);
// a missing file has no entries; an unreadable one has none either, and says why in the log.
std::vector<upstream::HostsEntry> read_hosts_entries(const std::string& path);

// Reads host.conf's multi setting (RESOLV_MULTI in the environment overrides it, as glibc).
bool read_host_conf_multi(const std::string& path);

class HostsFile final : public EventHandler {
  public:
    struct Paths {
        std::string hosts = "/etc/hosts";
        std::string host_conf = "/etc/host.conf";
    };
    explicit HostsFile(Paths paths) : paths_(std::move(paths)) {}
    ~HostsFile();
    HostsFile(const HostsFile&) = delete;
    HostsFile& operator=(const HostsFile&) = delete;

    // Reads the file and watches its folder and itself with inotify on `loop` (a missing file
    // is an empty table). `on_change` runs on the loop's thread after the first read and after
    // every reload that found the file (or host.conf's multi) changed: once per edit, however
    // many inotify events the edit made.
    void open(EventLoop& loop, std::function<void()> on_change);
    const HostsTable& table() const { return table_; }
    uint64_t generation() const { return generation_; }
    void on_event(uint32_t events) override;

  private:
    void reload();
    void watch_file();

    Paths paths_;
    HostsTable table_;
    std::string text_;  // what table_ was parsed from
    bool multi_ = false;
    uint64_t generation_ = 0;
    EventLoop* loop_ = nullptr;
    int inotify_fd_ = -1;
    int file_watch_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    std::function<void()> on_change_;
};

}  // namespace nscache::hostdb
