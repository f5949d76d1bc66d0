// SPDX-License-Identifier: BSD-3-Clause
// Follows glibc 2.33+'s nss/nss_database.c (process_line) and nss/nss_action_parse.c: a line
// is "<database>" then white space and/or colons then the services; the last line of a
// database wins; a line with no service list is a syntax error and skipped; a database name
// glibc does not know is kept too (harmless: only the five below are asked for).
#include "nsdb/nsswitch.h"

#include <strings.h>
#include <cctype>
#include <cerrno>

#include "common/files.h"

namespace nscache::nsdb {
namespace {

bool is_space(char c) {
    return std::isspace(static_cast<unsigned char>(c)) != 0;
}

bool equals_nocase(std::string_view a, const char* b) {
    size_t n = std::char_traits<char>::length(b);
    return a.size() == n && strncasecmp(a.data(), b, n) == 0;
}

// nss_action_parse: services and their [STATUS=action ...] items. False on a syntax error
// (an unknown status or action, a '[' that is not closed): glibc then does not use the list
// as written, so the caller marks the line as one only glibc's own calls reproduce.
bool parse_actions(std::string_view s, SwitchLine& out) {
    size_t i = 0;
    auto skip_space = [&] {
        while (i < s.size() && is_space(s[i])) ++i;
    };
    for (;;) {
        skip_space();
        if (i >= s.size()) return true;
        size_t start = i;
        while (i < s.size() && !is_space(s[i]) && s[i] != '[') ++i;
        if (i == start) return false;  // a '[' with no service before it
        out.services.emplace_back(s.substr(start, i - start));
        skip_space();
        if (i >= s.size() || s[i] != '[') continue;
        ++i;
        skip_space();
        do {
            out.has_actions = true;
            if (i < s.size() && s[i] == '!') ++i;
            start = i;
            while (i < s.size() && !is_space(s[i]) && s[i] != '=' && s[i] != ']') ++i;
            std::string_view status = s.substr(start, i - start);
            if (!equals_nocase(status, "SUCCESS") && !equals_nocase(status, "UNAVAIL") &&
                !equals_nocase(status, "NOTFOUND") && !equals_nocase(status, "TRYAGAIN"))
                return false;
            skip_space();
            if (i >= s.size() || s[i] != '=') return false;
            ++i;
            skip_space();
            start = i;
            while (i < s.size() && !is_space(s[i]) && s[i] != '=' && s[i] != ']') ++i;
            std::string_view action = s.substr(start, i - start);
            if (!equals_nocase(action, "RETURN") && !equals_nocase(action, "CONTINUE") &&
                !equals_nocase(action, "MERGE"))
                return false;
            skip_space();
        } while (i < s.size() && s[i] != ']');
        if (i >= s.size()) return false;
        ++i;  // the ']'
    }
}

bool is_files_source(const std::string& service, size_t compat_lines) {
    return service == "files" || (service == "compat" && compat_lines == 0);
}

}  // namespace

NsswitchConf NsswitchConf::parse(std::string_view text) {
    NsswitchConf conf;
    size_t pos = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        pos = end + 1;
        line = line.substr(0, line.find('#'));  // comments run to the end of the line
        size_t i = 0;
        while (i < line.size() && is_space(line[i])) ++i;
        size_t name_start = i;
        while (i < line.size() && !is_space(line[i]) && line[i] != ':') ++i;
        if (i >= line.size() || i == name_start) continue;  // a syntax error: skipped
        std::string name(line.substr(name_start, i - name_start));
        while (i < line.size() && (is_space(line[i]) || line[i] == ':')) ++i;
        SwitchLine parsed;
        parsed.present = true;
        if (!parse_actions(line.substr(i), parsed)) parsed.has_actions = true;
        conf.lines_[name] = std::move(parsed);
    }
    return conf;
}

std::optional<NsswitchConf> NsswitchConf::read(const std::string& path, std::string& error) {
    std::optional<std::string> text = read_small_file(path, 1u << 20, error);
    if (!text) {
        if (errno == ENOENT) return NsswitchConf();
        return std::nullopt;
    }
    return parse(*text);
}

SwitchLine NsswitchConf::line(std::string_view database) const {
    auto it = lines_.find(std::string(database));
    if (it != lines_.end()) return it->second;
    if (database == "initgroups") {
        SwitchLine group = line("group");
        group.merge_groups = true;
        return group;
    }
    SwitchLine fallback;
    fallback.services = {"files"};
    return fallback;
}

// "files" (or "compat" over a file with no +/- lines, which then reads as files does) first;
// more such sources later in the line are dropped, since they would read the same file again
// and say NOTFOUND again. A "compat" after files over a file with +/- lines stays a module:
// files has already answered every plain line, and only the compat module knows what the
// +/- lines add. A line that does not start with files, that has any [STATUS=action] item
// (even one that restates a default) or no service at all is proxied.
SourcePlan plan_for(const SwitchLine& line, size_t compat_lines) {
    SourcePlan plan;
    if (line.has_actions || line.services.empty() ||
        !is_files_source(line.services[0], compat_lines))
        return plan;
    for (size_t i = 1; i < line.services.size(); ++i)
        if (!is_files_source(line.services[i], compat_lines))
            plan.modules.push_back(line.services[i]);
    plan.plan = plan.modules.empty() ? Plan::files_only : Plan::files_then_modules;
    return plan;
}

}  // namespace nscache::nsdb
