// SPDX-License-Identifier: BSD-3-Clause
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "common/files.h"
#include "config/config.h"

namespace nscache {
namespace {

bool is_unspecified(const SocketAddress& a) {
    if (a.family() == AF_INET) {
        return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr == INADDR_ANY;
    }
    return IN6_IS_ADDR_UNSPECIFIED(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr);
}

// An upstream that is one of our own listening sockets would forward queries to ourselves.
bool is_own_address(const SocketAddress& upstream, const std::vector<SocketAddress>& listen) {
    for (const auto& l : listen) {
        if (l.port() != upstream.port()) continue;
        if (l == upstream) return true;
        if (is_unspecified(l) && (l.family() == upstream.family())) return true;
    }
    return false;
}

}  // namespace

std::optional<ConfigError> resolve_defaults(Config& config, const std::string& resolv_conf_path) {
    if (config.listen.empty()) {
        config.listen.push_back(*parse_socket_address("127.0.0.1:53", std::nullopt));
        config.listen.push_back(*parse_socket_address("[::1]:53", std::nullopt));
        config.listen_is_default = true;
    }
    if (config.allow.empty()) {
        config.allow.push_back(*parse_cidr("127.0.0.0/8"));
        config.allow.push_back(*parse_cidr("::1/128"));
    }
    if (config.metrics_allow.empty()) {
        config.metrics_allow.push_back(*parse_cidr("127.0.0.0/8"));
        config.metrics_allow.push_back(*parse_cidr("::1/128"));
    }
    if (config.threads == 0) {
        const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        config.threads = cpus > 0 ? static_cast<unsigned>(cpus) : 1;
    }
    if (config.min_ttl > config.max_ttl) {
        return ConfigError{"min-ttl (" + std::to_string(config.min_ttl) + ") is above max-ttl (" +
                           std::to_string(config.max_ttl) + ")"};
    }
    const bool default_rule =
        std::any_of(config.forwards.begin(), config.forwards.end(), [](const auto& f) {
            return std::find(f.domains.begin(), f.domains.end(), ".") != f.domains.end();
        });
    if (default_rule && !config.upstreams.empty()) {
        return ConfigError{
            "both `upstream` and a [[forward]] for \".\" name the default upstreams"};
    }
    if (!config.upstreams.empty() || default_rule) return std::nullopt;

    const std::string& path = config.resolv_file.empty() ? resolv_conf_path : config.resolv_file;
    std::string error;
    auto found = read_resolv_nameservers(path, config.listen, error);
    if (!found) return ConfigError{error + "; set upstream = [...] or --upstream"};
    config.upstreams.assign(found->begin(), found->end());
    config.upstreams_from_resolv_conf = true;
    config.resolv_conf_path = path;
    return std::nullopt;
}

std::optional<std::vector<SocketAddress>> read_resolv_nameservers(
    const std::string& path, const std::vector<SocketAddress>& listen, std::string& error) {
    std::string why;
    const auto text = read_small_file(path, kMaxConfigFileBytes, why);
    if (!text) {
        error = "no upstream given and " + path + " cannot be read: " + why;
        return std::nullopt;
    }
    std::istringstream resolv(*text);
    std::vector<SocketAddress> upstreams;
    std::string line;
    while (std::getline(resolv, line)) {
        std::istringstream words(line);
        std::string keyword, address;
        if (!(words >> keyword >> address) || keyword != "nameserver") continue;
        if (const size_t scope = address.find('%'); scope != std::string::npos) {
            address.resize(scope);  // link-local scope ids are not supported
        }
        auto parsed = parse_socket_address(address, 53);
        if (!parsed || is_own_address(*parsed, listen)) continue;
        if (upstreams.size() == kMaxUpstreams) break;  // glibc itself reads only 3
        upstreams.push_back(*parsed);
    }
    if (upstreams.empty()) {
        error = "no upstream servers: " + path + " names none besides nscache itself";
        return std::nullopt;
    }
    return upstreams;
}

}  // namespace nscache
