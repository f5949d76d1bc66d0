// `nscache serve`: settings from the config file, then flags, then machine defaults.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/daemon.h"
#include "cli/flag_parser.h"
#include "common/log.h"
#include "config/config.h"

namespace nscache {
namespace {

constexpr const char* kDefaultConfig = "/etc/nscache/nscache.toml";
constexpr const char* kResolvConf = "/etc/resolv.conf";

int usage_error(const std::string& message) {
    std::fprintf(stderr, "nscache serve: %s\n", message.c_str());
    return kExitUsage;
}

}  // namespace

int serve_command(const Args& args) {
    // Flags are read twice: first for --config (the file comes first, flags override it).
    std::string config_path;
    bool config_given = false;
    {
        FlagParser p(args);
        while (p.next()) {
            if (p.is_flag() && p.name() == "config") {
                auto v = p.value();
                if (!v) return usage_error(p.error());
                config_path = *v;
                config_given = true;
            }
        }
    }
    Config config;
    if (!config_given && access(kDefaultConfig, F_OK) == 0) config_path = kDefaultConfig;
    if (!config_path.empty()) {
        if (auto error = load_config_file(config_path, config)) {
            std::fprintf(stderr, "nscache: %s\n", error->message.c_str());
            return kExitUsage;
        }
    }

    std::vector<SocketAddress> listen, upstreams;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) return usage_error("unexpected argument '" + p.current() + "'");
        const std::string name = p.name();
        if (name == "verbose") {
            set_log_verbose(true);
            continue;
        }
        auto value = p.value();
        if (!value) return usage_error(p.error());
        if (name == "config") {
            continue;
        } else if (name == "listen") {
            auto a = parse_socket_address(*value, std::nullopt);
            if (!a)
                return usage_error("bad --listen address '" + *value +
                                   "' (expected ADDR:PORT or [ADDR6]:PORT)");
            listen.push_back(*a);
        } else if (name == "upstream") {
            auto a = parse_socket_address(*value, 53);
            if (!a)
                return usage_error("bad --upstream address '" + *value +
                                   "' (expected ADDR[:PORT])");
            upstreams.push_back(*a);
        } else if (name == "threads") {
            char* end = nullptr;
            const unsigned long n = std::strtoul(value->c_str(), &end, 10);
            if (value->empty() || *end != '\0' || n > 1024) {
                return usage_error("bad --threads '" + *value + "' (expected 0 to 1024)");
            }
            config.threads = static_cast<unsigned>(n);
        } else if (name == "cache-size") {
            auto size = parse_size(*value);
            if (!size || *size < (64u << 10)) {
                return usage_error("bad --cache-size '" + *value +
                                   "' (expected at least 64K, e.g. 64M)");
            }
            config.cache_size = *size;
        } else if (name == "control") {
            config.control = *value;
        } else if (name == "user") {
            config.user = *value;
        } else if (name == "nss-socket") {
            config.nss_socket = *value;
        } else if (name == "nscd-socket") {
            if (!value->empty() && (*value)[0] != '/') {
                return usage_error("bad --nscd-socket '" + *value +
                                   "' (expected an absolute path, or '' for off)");
            }
            config.nscd_socket = *value;
        } else {
            return usage_error("unknown flag --" + name);
        }
    }
    if (!listen.empty()) config.listen = listen;
    if (upstreams.size() > kMaxUpstreams) {
        return usage_error("at most " + std::to_string(kMaxUpstreams) + " --upstream addresses");
    }
    if (!upstreams.empty()) config.upstreams = upstreams;
    if (auto error = resolve_defaults(config, kResolvConf)) {
        std::fprintf(stderr, "nscache: %s\n", error->message.c_str());
        return kExitUsage;
    }
    return run_daemon(config);
}

}  // namespace nscache
