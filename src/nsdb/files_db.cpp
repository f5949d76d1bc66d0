// SPDX-License-Identifier: BSD-3-Clause
// The parsers follow glibc's nss_files line parsers (nss/nss_files/files-parse.c with the
// LINE_PARSER bodies of pwd/fgetpwent_r.c, grp/fgetgrent_r.c and files-service.c), so an
// odd line means here what it means to `files`: a missing trailing field is empty, an id is
// read as strtoul reads it (clamped to 32 bits), a line whose id field is empty or not a number
// is skipped.
#include "nsdb/files_db.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>

#include "common/files.h"

namespace nscache::nsdb {
namespace {

// /etc/passwd of a directory-backed host with 10,000 users is about 700 KB; 64 MiB leaves
// room for a few hundred thousand while still refusing a runaway file.
constexpr size_t kMaxFileBytes = 64u << 20;

bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

// Calls `fn` with each line the files module parses: the newline (and for services, from the
// first '#') cut off, leading white space skipped, blank and comment lines left out.
template <typename Fn>
void for_each_line(std::string_view text, bool hash_ends_line, Fn&& fn) {
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        size_t start = 0;
        while (start < line.size() && is_space(line[start])) ++start;
        line.remove_prefix(start);
        if (line.empty() || line[0] == '#') continue;
        if (hash_ends_line) line = line.substr(0, line.find('#'));
        // glibc's line is a C string: a NUL byte ends it.
        line = line.substr(0, line.find('\0'));
        fn(line);
    }
}

// STRING_FIELD with ':' and no swallowing: the text up to the next colon (or the end).
std::string_view colon_field(std::string_view& line) {
    size_t colon = line.find(':');
    std::string_view field = line.substr(0, colon);
    line = colon == std::string_view::npos ? std::string_view() : line.substr(colon + 1);
    return field;
}

// INT_FIELD: strtoul in `base` (leading white space and a sign allowed, as strtoul allows),
// then the field must end at `terminator` (consumed) or at the end of the line. glibc's
// strtou32 clamps anything past 32 bits to 0xffffffff.
bool number_field(std::string_view& line, char terminator, int base, unsigned long& value) {
    std::string text(line);
    char* endp = nullptr;
    value = std::strtoul(text.c_str(), &endp, base);
    if (endp == text.c_str()) return false;
    size_t used = static_cast<size_t>(endp - text.c_str());
    if (used < text.size()) {
        if (text[used] != terminator) return false;
        ++used;
    }
    line.remove_prefix(used);
    return true;
}

uint32_t clamp32(unsigned long value) {
    return value > 0xffffffffUL ? 0xffffffffu : static_cast<uint32_t>(value);
}

bool is_compat_name(std::string_view name) {
    return !name.empty() && (name[0] == '+' || name[0] == '-');
}

// parse_list: elements split at `separator`, leading white space of each skipped, empty
// elements dropped.
template <typename IsSeparator>
std::vector<std::string> parse_list(std::string_view rest, IsSeparator&& is_separator) {
    std::vector<std::string> out;
    size_t i = 0;
    while (i < rest.size()) {
        while (i < rest.size() && is_space(rest[i])) ++i;
        size_t start = i;
        while (i < rest.size() && !is_separator(rest[i])) ++i;
        if (i > start) out.emplace_back(rest.substr(start, i - start));
        if (i < rest.size()) ++i;
    }
    return out;
}

template <typename File>
std::optional<File> read_file(const std::string& path, std::string& error) {
    std::optional<std::string> text = read_small_file(path, kMaxFileBytes, error);
    if (!text) return std::nullopt;
    return File::parse(*text);
}

}  // namespace

PasswdFile PasswdFile::parse(std::string_view text) {
    PasswdFile file;
    for_each_line(text, false, [&](std::string_view line) {
        std::string_view name = colon_field(line);
        // compat lines ("+", "+name", "-@netgroup", "+name:::::") are not entries of files.
        if (is_compat_name(name)) {
            ++file.compat_lines_;
            return;
        }
        PasswdEntry e;
        e.name = name;
        e.passwd = colon_field(line);
        unsigned long uid = 0, gid = 0;
        if (!number_field(line, ':', 10, uid) || !number_field(line, ':', 10, gid)) return;
        e.uid = clamp32(uid);
        e.gid = clamp32(gid);
        e.gecos = colon_field(line);
        e.dir = colon_field(line);
        e.shell = line;  // the rest, colons included, as glibc leaves it
        size_t index = file.entries_.size();
        file.by_name_.emplace(e.name, index);
        file.by_uid_.emplace(e.uid, index);
        file.entries_.push_back(std::move(e));
    });
    return file;
}

std::optional<PasswdFile> PasswdFile::read(const std::string& path, std::string& error) {
    return read_file<PasswdFile>(path, error);
}

const PasswdEntry* PasswdFile::by_name(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const PasswdEntry* PasswdFile::by_uid(uint32_t uid) const {
    auto it = by_uid_.find(uid);
    return it == by_uid_.end() ? nullptr : &entries_[it->second];
}

GroupFile GroupFile::parse(std::string_view text) {
    GroupFile file;
    for_each_line(text, false, [&](std::string_view line) {
        std::string_view name = colon_field(line);
        if (is_compat_name(name)) {
            ++file.compat_lines_;
            return;
        }
        GroupEntry e;
        e.name = name;
        e.passwd = colon_field(line);
        unsigned long gid = 0;
        if (!number_field(line, ':', 10, gid)) return;
        e.gid = clamp32(gid);
        e.members = parse_list(line, [](char c) { return c == ','; });
        size_t index = file.entries_.size();
        file.by_name_.emplace(e.name, index);
        file.by_gid_.emplace(e.gid, index);
        for (const std::string& m : e.members) {
            std::vector<uint32_t>& gids = file.member_of_[m];
            bool seen = false;
            for (uint32_t g : gids) seen = seen || g == e.gid;
            if (!seen) gids.push_back(e.gid);
        }
        file.entries_.push_back(std::move(e));
    });
    return file;
}

std::optional<GroupFile> GroupFile::read(const std::string& path, std::string& error) {
    return read_file<GroupFile>(path, error);
}

const GroupEntry* GroupFile::by_name(std::string_view name) const {
    auto it = by_name_.find(std::string(name));
    return it == by_name_.end() ? nullptr : &entries_[it->second];
}

const GroupEntry* GroupFile::by_gid(uint32_t gid) const {
    auto it = by_gid_.find(gid);
    return it == by_gid_.end() ? nullptr : &entries_[it->second];
}

std::vector<uint32_t> GroupFile::groups_of(std::string_view user) const {
    auto it = member_of_.find(std::string(user));
    return it == member_of_.end() ? std::vector<uint32_t>() : it->second;
}

ServicesFile ServicesFile::parse(std::string_view text) {
    ServicesFile file;
    for_each_line(text, true, [&](std::string_view line) {
        ServiceEntry e;
        size_t i = 0;
        while (i < line.size() && !is_space(line[i])) ++i;
        e.name = line.substr(0, i);
        while (i < line.size() && is_space(line[i])) ++i;
        line.remove_prefix(i);
        // "port/proto": strtoul in base 0 (so 0x50 and 010 are read as glibc reads them),
        // truncated to 16 bits by htons, then one or more '/'.
        std::string rest(line);
        char* endp = nullptr;
        unsigned long port = std::strtoul(rest.c_str(), &endp, 0);
        if (endp == rest.c_str() || *endp != '/') return;
        line.remove_prefix(static_cast<size_t>(endp - rest.c_str()));
        while (!line.empty() && line[0] == '/') line.remove_prefix(1);
        e.port = static_cast<int32_t>(htons(static_cast<uint16_t>(port)));
        i = 0;
        while (i < line.size() && !is_space(line[i])) ++i;
        e.proto = line.substr(0, i);
        e.aliases = parse_list(line.substr(i), is_space);
        size_t index = file.entries_.size();
        file.by_name_.emplace(e.name, index);
        for (const std::string& a : e.aliases) file.by_name_.emplace(a, index);
        file.by_port_.emplace(e.port, index);
        file.entries_.push_back(std::move(e));
    });
    return file;
}

std::optional<ServicesFile> ServicesFile::read(const std::string& path, std::string& error) {
    return read_file<ServicesFile>(path, error);
}

const ServiceEntry* ServicesFile::by_name(std::string_view name, std::string_view proto) const {
    // The first line in file order whose name or alias matches (and whose protocol does).
    size_t best = SIZE_MAX;
    auto [first, last] = by_name_.equal_range(std::string(name));
    for (auto it = first; it != last; ++it) {
        const ServiceEntry& e = entries_[it->second];
        if (it->second < best && (proto.empty() || e.proto == proto)) best = it->second;
    }
    return best == SIZE_MAX ? nullptr : &entries_[best];
}

const ServiceEntry* ServicesFile::by_port(int32_t port, std::string_view proto) const {
    size_t best = SIZE_MAX;
    auto [first, last] = by_port_.equal_range(port);
    for (auto it = first; it != last; ++it) {
        const ServiceEntry& e = entries_[it->second];
        if (it->second < best && (proto.empty() || e.proto == proto)) best = it->second;
    }
    return best == SIZE_MAX ? nullptr : &entries_[best];
}

}  // namespace nscache::nsdb
