// SPDX-License-Identifier: BSD-3-Clause
#include "hostdb/hosts_file.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/files.h"
#include "common/log.h"
#include "dns/name.h"
#include "dns/wire.h"

namespace nscache::hostdb {
namespace {

constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;
// A hosts file larger than this is read up to here (glibc has no limit; a bound keeps a
// runaway file from taking the daemon's memory).
constexpr size_t kMaxHostsBytes = 64u << 20;

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        if (c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
    }
    return out;
}

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

std::vector<std::string_view> fields_of(std::string_view line) {
    std::vector<std::string_view> out;
    size_t i = 0;
    while (i < line.size()) {
        while (i < line.size() && is_space(line[i])) ++i;
        size_t j = i;
        while (j < line.size() && !is_space(line[j])) ++j;
        if (j > i) out.push_back(line.substr(i, j - i));
        i = j;
    }
    return out;
}

// The file's text, up to kMaxHostsBytes and then only whole lines (a name cut in two must not
// be served). A file that is missing reads as empty; one that cannot be read too, with a
// warning, as the daemon's user may lack the right to read it after a privilege switch; and
// so does one that is not a regular file: a FIFO would block the host front's thread until
// something wrote to it (O_NONBLOCK opens it at once; fstat then refuses it), a device such
// as /dev/zero never ends.
std::string read_file(const std::string& path, bool& exists) {
    std::string text;
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    exists = fd >= 0;
    if (fd < 0) {
        if (errno != ENOENT) log_warning("cannot read %s: %s", path.c_str(), std::strerror(errno));
        return text;
    }
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        log_warning("cannot read %s: not a regular file", path.c_str());
        close(fd);
        return text;
    }
    char chunk[65536];
    for (;;) {
        const ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            log_warning("cannot read %s: %s", path.c_str(), std::strerror(errno));
            // What was read ends where the error came: its last line may be cut.
            const size_t last = text.rfind('\n');
            text.resize(last == std::string::npos ? 0 : last + 1);
            break;
        }
        if (n == 0) break;
        text.append(chunk, static_cast<size_t>(n));
        if (text.size() > kMaxHostsBytes) {
            // The last whole line that starts within the bound (its newline may be just past).
            const size_t last = text.rfind('\n', kMaxHostsBytes);
            text.resize(last == std::string::npos ? 0 : last + 1);
            log_warning("%s is larger than %zu MiB: read up to there", path.c_str(),
                        kMaxHostsBytes >> 20);
            break;
        }
    }
    close(fd);
    return text;
}

}  // namespace

HostsTable HostsTable::parse(std::string_view text, bool multi) {
    HostsTable t;
    t.multi_ = multi;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        if (const size_t hash = line.find('#'); hash != std::string_view::npos) {
            line = line.substr(0, hash);
        }
        const auto fields = fields_of(line);
        if (fields.size() < 2) continue;
        Line l;
        const std::string address(fields[0]);
        if (inet_pton(AF_INET, address.c_str(), l.address.data()) == 1) {
            l.family = kAfInet;
        } else if (inet_pton(AF_INET6, address.c_str(), l.address.data()) == 1) {
            l.family = kAfInet6;
        } else {
            continue;  // glibc ignores a line whose address it cannot read
        }
        l.name = std::string(fields[1]);
        for (size_t i = 2; i < fields.size(); ++i) l.aliases.emplace_back(fields[i]);
        const auto index = static_cast<uint32_t>(t.lines_.size());
        auto add = [&t, index](std::string_view name) {
            auto& list = t.by_name_[lower(name)];
            if (list.empty() || list.back() != index) list.push_back(index);
        };
        add(l.name);
        for (const auto& a : l.aliases) add(a);
        for (const int family : {kAfInet, kAfInet6}) {
            uint8_t a[16];
            if (!address_as(l, family, a)) continue;
            std::string key(1, static_cast<char>(family));
            key.append(reinterpret_cast<const char*>(a), family == kAfInet ? 4 : 16);
            t.by_address_.try_emplace(std::move(key), index);
        }
        t.lines_.push_back(std::move(l));
    }
    return t;
}

std::vector<upstream::HostsEntry> HostsTable::dns_entries() const {
    std::vector<upstream::HostsEntry> out;
    char text[INET6_ADDRSTRLEN];
    for (const Line& line : lines_) {
        const int af = line.family == kAfInet ? AF_INET : AF_INET6;
        if (inet_ntop(af, line.address.data(), text, sizeof text) == nullptr) continue;
        const uint16_t type = line.family == kAfInet ? dns::rtype::A : dns::rtype::AAAA;
        auto add = [&](const std::string& name) {
            // Only what DNS can carry: a name glibc accepts may not be one. The root is
            // never a local name.
            if (!dns::name_from_text(name)) return;
            std::string n = lower(name);
            if (n.back() != '.') n += '.';
            if (n == ".") return;
            out.push_back(upstream::HostsEntry{std::move(n), type, text});
        };
        add(line.name);
        for (const auto& alias : line.aliases) add(alias);
    }
    return out;
}

std::vector<upstream::HostsEntry> read_hosts_entries(const std::string& path) {
    bool exists = false;
    const std::string text = read_file(path, exists);
    return HostsTable::parse(text, true).dns_entries();
}

bool HostsTable::address_as(const Line& line, int family, uint8_t* out) {
    static const uint8_t kMapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    static const uint8_t kLoopback6[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    if (family == 0 || family == line.family) {
        std::memcpy(out, line.address.data(), line.family == kAfInet ? 4 : 16);
        return true;
    }
    if (family == kAfInet6) return false;  // an IPv4 line is not an IPv6 address
    if (std::memcmp(line.address.data(), kMapped, 12) == 0) {
        std::memcpy(out, line.address.data() + 12, 4);
        return true;
    }
    if (std::memcmp(line.address.data(), kLoopback6, 16) == 0) {
        const uint8_t loopback[4] = {127, 0, 0, 1};
        std::memcpy(out, loopback, 4);
        return true;
    }
    return false;
}

std::optional<HostAnswer> HostsTable::by_name(std::string_view name, int family) const {
    const auto it = by_name_.find(lower(name));
    if (it == by_name_.end()) return std::nullopt;
    HostAnswer r;
    bool any = false;
    for (const uint32_t index : it->second) {
        const Line& line = lines_[index];
        uint8_t address[16];
        if (!address_as(line, family, address)) continue;
        const int as = family == 0 ? line.family : family;
        if (as == kAfInet) {
            std::array<uint8_t, 4> a;
            std::memcpy(a.data(), address, 4);
            r.ipv4.push_back(a);
        } else {
            std::array<uint8_t, 16> a;
            std::memcpy(a.data(), address, 16);
            r.ipv6.push_back(a);
        }
        if (!any) {
            r.canonical = line.name;
            if (family != 0) r.aliases = line.aliases;
        } else if (family != 0) {
            // glibc's multi merge: the later line's aliases, then its name if it differs.
            r.aliases.insert(r.aliases.end(), line.aliases.begin(), line.aliases.end());
            if (line.name != r.canonical) r.aliases.push_back(line.name);
        }
        any = true;
        if (!multi_) break;
    }
    // (AF_UNSPEC: gethostbyname4_r keeps the file's order across families; here IPv4 comes
    // first. getaddrinfo sorts the addresses by RFC 3484 afterwards either way.)
    if (!any) return std::nullopt;
    r.status = HostStatus::Found;
    r.ttl = kHostsFileTtl;
    r.from_hosts_file = true;
    return r;
}

std::optional<HostAnswer> HostsTable::by_addr(int family, const uint8_t* address) const {
    const size_t size = family == kAfInet ? 4 : 16;
    std::string key(1, static_cast<char>(family));
    key.append(reinterpret_cast<const char*>(address), size);
    if (const auto it = by_address_.find(key); it != by_address_.end()) {
        const Line& line = lines_[it->second];
        HostAnswer r;
        r.status = HostStatus::Found;
        r.ttl = kHostsFileTtl;
        r.from_hosts_file = true;
        r.canonical = line.name;
        r.aliases = line.aliases;
        if (family == kAfInet) {
            r.ipv4.push_back({address[0], address[1], address[2], address[3]});
        } else {
            std::array<uint8_t, 16> v6;
            std::memcpy(v6.data(), address, 16);
            r.ipv6.push_back(v6);
        }
        return r;
    }
    return std::nullopt;
}

bool read_host_conf_multi(const std::string& path) {
    bool multi = false;
    bool exists = false;
    const std::string text = read_file(path, exists);
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
        if (const size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
        const auto fields = fields_of(line);
        if (fields.size() >= 2 && strncasecmp(fields[0].data(), "multi", 5) == 0 &&
            fields[0].size() == 5) {
            multi = strncasecmp(fields[1].data(), "on", 2) == 0 && fields[1].size() == 2;
        }
    }
    if (const char* env = std::getenv("RESOLV_MULTI")) multi = strcasecmp(env, "on") == 0;
    return multi;
}

HostsFile::~HostsFile() {
    if (inotify_fd_ >= 0) {
        if (loop_ != nullptr) loop_->remove(registration_);
        close(inotify_fd_);
    }
}

void HostsFile::open(EventLoop& loop, std::function<void()> on_change) {
    loop_ = &loop;
    on_change_ = std::move(on_change);
    inotify_fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (inotify_fd_ >= 0) {
        // The folder sees an editor's rename over the file; the file itself sees writes in
        // place (and through a bind mount, whose folder events go elsewhere).
        const std::string folder = parent_folder(paths_.hosts);
        if (inotify_add_watch(inotify_fd_, folder.c_str(),
                              IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_DELETE | IN_MOVED_FROM |
                                  IN_ATTRIB | IN_ONLYDIR) < 0) {
            log_warning("cannot watch %s for changes to %s: %s", folder.c_str(),
                        paths_.hosts.c_str(), std::strerror(errno));
        }
        watch_file();
        if (!loop.add(inotify_fd_, EPOLLIN, this, registration_)) {
            close(inotify_fd_);
            inotify_fd_ = -1;
        }
    }
    reload();
}

void HostsFile::watch_file() {
    if (inotify_fd_ < 0) return;
    if (file_watch_ >= 0) inotify_rm_watch(inotify_fd_, file_watch_);
    file_watch_ =
        inotify_add_watch(inotify_fd_, paths_.hosts.c_str(),
                          IN_MODIFY | IN_CLOSE_WRITE | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF);
}

void HostsFile::on_event(uint32_t) {
    alignas(inotify_event) char buffer[4096];
    bool changed = false;
    const std::string base = paths_.hosts.substr(paths_.hosts.rfind('/') + 1);
    for (;;) {
        const ssize_t n = read(inotify_fd_, buffer, sizeof buffer);
        if (n <= 0) break;
        for (ssize_t off = 0; off < n;) {
            const auto* e = reinterpret_cast<const inotify_event*>(buffer + off);
            off += static_cast<ssize_t>(sizeof(inotify_event) + e->len);
            if (e->wd == file_watch_ || (e->len > 0 && base == e->name) ||
                (e->mask & IN_Q_OVERFLOW)) {
                changed = true;
            }
        }
    }
    if (!changed) return;
    watch_file();  // a replaced file is a new inode
    reload();
}

void HostsFile::reload() {
    bool exists = false;
    std::string text = read_file(paths_.hosts, exists);
    const bool multi = read_host_conf_multi(paths_.host_conf);
    // One edit is several inotify events (a write, its close, the folder's), often read in
    // separate turns: only the first that finds new bytes reloads and tells the fronts.
    if (generation_ > 0 && text == text_ && multi == multi_) return;
    table_ = HostsTable::parse(text, multi);
    text_ = std::move(text);
    multi_ = multi;
    ++generation_;
    if (generation_ > 1) log_info("%s reloaded: %zu lines", paths_.hosts.c_str(), table_.lines());
    if (on_change_) on_change_();
}

}  // namespace nscache::hostdb
