// SPDX-License-Identifier: BSD-3-Clause
// `nscache serve`: settings from the config file, then flags, then machine defaults.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "cli/commands.h"
#include "cli/config_source.h"
#include "cli/daemon.h"
#include "cli/flag_parser.h"
#include "common/log.h"
#include "config/config.h"
#include "config/config_log.h"

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
    ConfigSource source;
    source.resolv_conf = kResolvConf;
    bool config_given = false;
    std::vector<SocketAddress> listen;
    std::vector<UpstreamAddress> upstreams;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) return usage_error("unexpected argument '" + p.current() + "'");
        const std::string name = p.name();
        if (name == "verbose") {
            source.overrides.push_back([](Config& c) { c.log_level = LogThreshold::Debug; });
            continue;
        }
        auto value = p.value();
        if (!value) return usage_error(p.error());
        if (name == "config") {
            source.path = *value;
            config_given = true;
        } else if (name == "listen") {
            auto a = parse_socket_address(*value, std::nullopt);
            if (!a)
                return usage_error("bad --listen address '" + *value +
                                   "' (expected ADDR:PORT or [ADDR6]:PORT)");
            listen.push_back(*a);
        } else if (name == "upstream") {
            auto a = parse_upstream_address(*value);
            if (!a)
                return usage_error("bad --upstream address '" + *value +
                                   "' (expected ADDR[:PORT] or tls://ADDR[:PORT][#NAME])");
            upstreams.push_back(*a);
        } else if (name == "threads") {
            char* end = nullptr;
            const unsigned long n = std::strtoul(value->c_str(), &end, 10);
            if (value->empty() || *end != '\0' || n > 1024) {
                return usage_error("bad --threads '" + *value + "' (expected 0 to 1024)");
            }
            source.overrides.push_back([n](Config& c) { c.threads = static_cast<unsigned>(n); });
        } else if (name == "cache-size") {
            auto size = parse_size(*value);
            if (!size || *size < (64u << 10)) {
                return usage_error("bad --cache-size '" + *value +
                                   "' (expected at least 64K, e.g. 64M)");
            }
            source.overrides.push_back([size = *size](Config& c) { c.cache_size = size; });
        } else if (name == "control") {
            source.overrides.push_back([v = *value](Config& c) { c.control = v; });
        } else if (name == "user") {
            source.overrides.push_back([v = *value](Config& c) { c.user = v; });
        } else if (name == "nss-socket") {
            source.overrides.push_back([v = *value](Config& c) { c.nss_socket = v; });
        } else if (name == "nscd-socket") {
            if (!value->empty() && (*value)[0] != '/') {
                return usage_error("bad --nscd-socket '" + *value +
                                   "' (expected an absolute path, or '' for off)");
            }
            source.overrides.push_back([v = *value](Config& c) { c.nscd_socket = v; });
        } else {
            return usage_error("unknown flag --" + name);
        }
    }
    if (!config_given && access(kDefaultConfig, F_OK) == 0) source.path = kDefaultConfig;
    if (upstreams.size() > kMaxUpstreams) {
        return usage_error("at most " + std::to_string(kMaxUpstreams) + " --upstream addresses");
    }
    if (!listen.empty()) source.overrides.push_back([listen](Config& c) { c.listen = listen; });
    if (!upstreams.empty()) {
        source.overrides.push_back([upstreams](Config& c) { c.upstreams = upstreams; });
    }
    Config config;
    if (auto error = source.load(config)) {
        log_config_refused(*error, ConfigEvent::Start);
        return kExitUsage;
    }
    return run_daemon(source, config);
}

}  // namespace nscache
