// SPDX-License-Identifier: BSD-3-Clause
// `nscache serve`: settings from the config file, then flags, then machine defaults. Flags
// that set a config key go through that key's setter (config.h: set_config_key).
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/daemon.h"
#include "cli/flag_parser.h"
#include "common/log.h"
#include "config/config.h"
#include "config/config_log.h"
#include "config/config_source.h"

namespace nscache {
namespace {

constexpr const char* kDefaultConfig = "/etc/nscache/nscache.toml";
constexpr const char* kResolvConf = "/etc/resolv.conf";

int usage_error(const std::string& message) {
    std::fprintf(stderr, "nscache serve: %s\n", message.c_str());
    return kExitUsage;
}

// The flags that set a config key of the same name, and how their text stands for a value.
// Each goes through the key's own setter (set_config_key), as the file's value would.
struct KeyFlag {
    const char* name;
    TextAs as;
};
constexpr KeyFlag kKeyFlags[] = {
    {"listen", TextAs::List},       {"upstream", TextAs::List},      {"threads", TextAs::Integer},
    {"cache-size", TextAs::String}, {"control", TextAs::String},     {"user", TextAs::String},
    {"nss-socket", TextAs::String}, {"nscd-socket", TextAs::String},
};

const KeyFlag* key_flag(const std::string& name) {
    for (const KeyFlag& f : kKeyFlags) {
        if (name == f.name) return &f;
    }
    return nullptr;
}

// Checks `texts` with the key's setter (on a scratch Config: the file is read later, at
// every load) and names the flag in the message.
std::optional<std::string> check_flag(const KeyFlag& flag, const std::vector<std::string>& texts) {
    Config scratch;
    const Result<void> set = set_config_key(scratch, flag.name, flag.as, texts);
    if (set) return std::nullopt;
    // As the file's "KEY: message", with the flag's value where the message lacks it.
    if (flag.as == TextAs::List) return "--" + std::string(flag.name) + ": " + set.error();
    return "--" + std::string(flag.name) + " '" + texts.front() + "': " + set.error();
}

// A flag's value over whatever the file gave, at start and at every reload; checked already.
std::function<void(Config&)> override_key(const KeyFlag& flag, std::vector<std::string> texts) {
    return [&flag, texts = std::move(texts)](Config& c) {
        (void)set_config_key(c, flag.name, flag.as, texts);
    };
}

}  // namespace

int serve_command(const Args& args) {
    ConfigSource source;
    source.resolv_conf = kResolvConf;
    bool config_given = false;
    bool takeover = false;
    // A list flag given several times gives all its values, in order; other flags: the last.
    std::map<const KeyFlag*, std::vector<std::string>> lists;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) return usage_error("unexpected argument '" + p.current() + "'");
        const std::string name = p.name();
        if (name == "takeover") {
            takeover = true;
            continue;
        }
        if (name == "verbose") {
            source.overrides.push_back([](Config& c) { c.log_level = LogThreshold::Debug; });
            continue;
        }
        auto value = p.value();
        if (!value) return usage_error(p.error());
        if (name == "config") {
            source.path = *value;
            config_given = true;
            continue;
        }
        const KeyFlag* flag = key_flag(name);
        if (flag == nullptr) return usage_error("unknown flag --" + name);
        // Each value is checked as it comes, so the first bad one is the one named.
        if (auto error = check_flag(*flag, {*value})) return usage_error(*error);
        if (flag->as == TextAs::List) {
            lists[flag].push_back(*value);
        } else {
            source.overrides.push_back(override_key(*flag, {*value}));
        }
    }
    if (!config_given && access(kDefaultConfig, F_OK) == 0) source.path = kDefaultConfig;
    // Lists last, as before: --listen, then --upstream (a whole list checked: at most 64).
    for (const KeyFlag& flag : kKeyFlags) {
        auto it = lists.find(&flag);
        if (it == lists.end()) continue;
        if (auto error = check_flag(flag, it->second)) return usage_error(*error);
        source.overrides.push_back(override_key(flag, std::move(it->second)));
    }
    Config config;
    if (auto error = source.load(config)) {
        log_config_refused(*error, ConfigEvent::Start);
        return kExitUsage;
    }
    return run_daemon(source, config, takeover);
}

}  // namespace nscache
