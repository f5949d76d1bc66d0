// SPDX-License-Identifier: BSD-3-Clause
// The TOML side of the configuration (toml++). Every key maps to one setter; each setter
// checks its value and says what it expected, and the caller adds FILE:LINE (or, for a flag
// of `nscache serve`, which comes through set_config_key, the flag's name).
#include <toml++/toml.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "common/files.h"
#include "config/config.h"

namespace nscache {
namespace {

using Setter = std::function<Result<void>(const toml::node&, Config&)>;

Result<void> string_of(const toml::node& node, std::string& out) {
    auto value = node.value<std::string>();
    if (!value) return Error{"expected a string"};
    out = *value;
    return {};
}

Result<void> bool_of(const toml::node& node, bool& out) {
    auto value = node.value<bool>();
    if (!value) return Error{"expected true or false"};
    out = *value;
    return {};
}

// A TOML integer, and nothing else: toml++'s value<int64_t>() would also convert a float,
// which is undefined for one out of range (found by fuzz_config: max-ttl = 860000E0081).
std::optional<int64_t> integer_of(const toml::node& node) {
    if (const auto* i = node.as_integer()) return i->get();
    return std::nullopt;
}

template <typename T>
Result<void> uint_of(const toml::node& node, T& out, uint64_t max) {
    auto value = integer_of(node);
    if (!value || *value < 0 || static_cast<uint64_t>(*value) > max) {
        return Error{"expected a whole number from 0 to " + std::to_string(max)};
    }
    out = static_cast<T>(*value);
    return {};
}

// A duration: a string with a unit or a whole number of seconds.
Result<void> duration_of(const toml::node& node, uint64_t& out_ms) {
    if (auto seconds = integer_of(node)) {
        if (*seconds < 0 || static_cast<uint64_t>(*seconds) > UINT64_MAX / 1000) {
            return Error{"expected a duration (\"500ms\", \"2s\", \"1d\") or seconds"};
        }
        out_ms = static_cast<uint64_t>(*seconds) * 1000;
        return {};
    }
    auto text = node.value<std::string>();
    auto ms = text ? parse_duration_ms(*text) : std::nullopt;
    if (!ms) return Error{"expected a duration (\"500ms\", \"2s\", \"1d\") or seconds"};
    out_ms = *ms;
    return {};
}

Setter duration_ms(uint32_t Config::*field, uint64_t max_ms) {
    return [field, max_ms](const toml::node& node, Config& c) -> Result<void> {
        uint64_t ms = 0;
        if (auto err = duration_of(node, ms); !err) return err;
        if (ms > max_ms)
            return Error{"duration too long (at most " + std::to_string(max_ms / 1000) + "s)"};
        c.*field = static_cast<uint32_t>(ms);
        return {};
    };
}

Setter duration_s(uint32_t Config::*field) {
    return [field](const toml::node& node, Config& c) -> Result<void> {
        uint64_t ms = 0;
        if (auto err = duration_of(node, ms); !err) return err;
        if (ms / 1000 > UINT32_MAX) return Error{"duration too long"};
        c.*field = static_cast<uint32_t>(ms / 1000);
        return {};
    };
}

Setter seconds(uint32_t Config::*field) {
    return [field](const toml::node& node, Config& c) {
        return uint_of(node, c.*field, 0x7FFFFFFF);  // RFC 2181 §8: TTLs are 31-bit
    };
}

// RFC 9520 §3.2: resolution failures are cached for at least 1 s and at most 5 minutes.
Setter failure_duration(uint32_t Config::*field) {
    return [field](const toml::node& node, Config& c) -> Result<void> {
        uint64_t ms = 0;
        if (auto err = duration_of(node, ms); !err) return err;
        if (ms < 1'000 || ms > 300'000) return Error{"expected a duration from 1s to 300s"};
        c.*field = static_cast<uint32_t>(ms);
        return {};
    };
}

Setter nscd_policy(std::string Config::*field) {
    return [field](const toml::node& node, Config& c) -> Result<void> {
        auto text = node.value<std::string>();
        if (!text ||
            (*text != "auto" && *text != "cache" && *text != "proxy" && *text != "decline")) {
            return Error{"expected \"auto\", \"cache\", \"proxy\" or \"decline\""};
        }
        c.*field = *text;
        return {};
    };
}

Setter string_field(std::string Config::*field) {
    return [field](const toml::node& node, Config& c) { return string_of(node, c.*field); };
}

Setter bool_field(bool Config::*field) {
    return [field](const toml::node& node, Config& c) { return bool_of(node, c.*field); };
}

template <typename Parse>
Result<void> each_string(const toml::node& node, Parse&& parse) {
    const toml::array* array = node.as_array();
    if (array == nullptr) return Error{"expected an array of strings"};
    for (const toml::node& item : *array) {
        auto text = item.value<std::string>();
        if (!text) return Error{"expected an array of strings"};
        if (auto err = parse(*text); !err) return err;
    }
    return {};
}

Setter address_list(std::vector<SocketAddress> Config::*field, std::optional<uint16_t> port) {
    return [field, port](const toml::node& node, Config& c) {
        (c.*field).clear();
        return each_string(node, [&](const std::string& text) -> Result<void> {
            auto address = parse_socket_address(text, port);
            if (!address)
                return Error{"bad address '" + text + "' (expected ADDR:PORT or [ADDR6]:PORT)"};
            (c.*field).push_back(*address);
            return {};
        });
    };
}

Setter cidr_list(std::vector<Cidr> Config::*field) {
    return [field](const toml::node& node, Config& c) {
        (c.*field).clear();
        return each_string(node, [&](const std::string& text) -> Result<void> {
            auto cidr = parse_cidr(text);
            if (!cidr) return Error{"bad network '" + text + "' (expected ADDR/PREFIX)"};
            (c.*field).push_back(*cidr);
            return {};
        });
    };
}

const std::map<std::string, Setter, std::less<>>& setters() {
    static const std::map<std::string, Setter, std::less<>> table = {
        {"listen", address_list(&Config::listen, std::nullopt)},
        {"listen-tls", address_list(&Config::listen_tls, uint16_t{853})},
        {"listen-https", address_list(&Config::listen_https, uint16_t{443})},
        {"tls-certificate", string_field(&Config::tls_certificate)},
        {"tls-private-key", string_field(&Config::tls_private_key)},
        {"https-path",
         [](const toml::node& n, Config& c) -> Result<void> {
             std::string path;
             if (auto err = string_of(n, path); !err) return err;
             // The path alone: a query string or fragment could never match a request.
             if (path.empty() || path[0] != '/' ||
                 path.find_first_of("?# \t") != std::string::npos) {
                 return Error{"expected an absolute URI path such as \"/dns-query\""};
             }
             c.https_path = path;
             return {};
         }},
        {"upstream",
         [](const toml::node& n, Config& c) -> Result<void> {
             c.upstreams.clear();
             auto err = each_string(n, [&](const std::string& text) -> Result<void> {
                 auto a = parse_upstream_address(text);
                 if (!a) {
                     return Error{"bad upstream '" + text +
                                  "' (expected ADDR[:PORT], tls://ADDR[:PORT][#NAME] or "
                                  "https://ADDR[:PORT][/PATH][#NAME])"};
                 }
                 c.upstreams.push_back(*a);
                 return {};
             });
             if (!err) return err;
             if (c.upstreams.size() > kMaxUpstreams) {
                 return Error{"at most " + std::to_string(kMaxUpstreams) + " upstreams"};
             }
             return {};
         }},
        {"threads", [](const toml::node& n, Config& c) { return uint_of(n, c.threads, 1024); }},
        {"cache-size",
         [](const toml::node& n, Config& c) -> Result<void> {
             std::optional<size_t> size;
             if (auto v = integer_of(n)) {
                 if (*v >= 0) size = static_cast<size_t>(*v);
             } else if (auto text = n.value<std::string>()) {
                 size = parse_size(*text);
             }
             if (!size || *size < (64u << 10))
                 return Error{"expected a size of at least 64K (\"64M\")"};
             c.cache_size = *size;
             return {};
         }},
        {"allow", cidr_list(&Config::allow)},
        {"allow-snoop", cidr_list(&Config::allow_snoop)},
        {"min-ttl", seconds(&Config::min_ttl)},
        {"max-ttl", seconds(&Config::max_ttl)},
        {"negative-max-ttl", seconds(&Config::negative_max_ttl)},
        {"servfail-ttl", duration_s(&Config::servfail_ttl)},
        {"failure-ttl", failure_duration(&Config::failure_ttl_ms)},
        {"failure-ttl-max", failure_duration(&Config::failure_ttl_max_ms)},
        {"query-timeout", duration_ms(&Config::query_timeout_ms, 60'000)},
        {"edns-buffer-size",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.edns_buffer_size, 65535); !err) return err;
             if (c.edns_buffer_size < 512) return Error{"expected 512 or more"};
             return {};
         }},
        {"max-tcp-connections",
         [](const toml::node& n, Config& c) {
             return uint_of(n, c.max_tcp_connections, 1'000'000);
         }},
        {"max-tcp-per-client",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.max_tcp_per_client, 1'000'000); !err) return err;
             if (c.max_tcp_per_client == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"tcp-idle-timeout", duration_ms(&Config::tcp_idle_timeout_ms, 3'600'000)},
        {"tcp-read-timeout", duration_ms(&Config::tcp_read_timeout_ms, 600'000)},
        {"max-upstream-queries",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.max_upstream_queries, 1'000'000); !err) return err;
             if (c.max_upstream_queries == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"upstream-sockets",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.upstream_sockets, 4096); !err) return err;
             if (c.upstream_sockets == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"upstream-socket-uses",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.upstream_socket_uses, 1'000'000); !err) return err;
             if (c.upstream_socket_uses == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"upstream-cookies", bool_field(&Config::upstream_cookies)},
        {"upstream-idle-timeout", duration_ms(&Config::upstream_idle_timeout_ms, 3'600'000)},
        {"tls-ca-file", string_field(&Config::tls_ca_file)},
        {"tls-auth",
         [](const toml::node& n, Config& c) -> Result<void> {
             std::string text;
             if (auto err = string_of(n, text); !err) return err;
             if (text == "strict") {
                 c.tls_auth = TlsAuth::Strict;
             } else if (text == "opportunistic") {
                 c.tls_auth = TlsAuth::Opportunistic;
             } else {
                 return Error{"expected \"strict\" or \"opportunistic\""};
             }
             return {};
         }},
        {"tls-pin",
         [](const toml::node& n, Config& c) -> Result<void> {
             c.tls_pins.clear();
             return each_string(n, [&](const std::string& text) -> Result<void> {
                 auto pin = parse_spki_pin(text);
                 if (!pin) {
                     return Error{"bad pin '" + text +
                                  "' (expected \"ADDR[:PORT] BASE64\", the base64 of a SHA-256)"};
                 }
                 c.tls_pins.push_back(*pin);
                 return {};
             });
         }},
        {"control", string_field(&Config::control)},
        {"control-group", string_field(&Config::control_group)},
        {"nss", bool_field(&Config::nss)},
        {"nss-socket", string_field(&Config::nss_socket)},
        {"nscd-socket",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = string_of(n, c.nscd_socket); !err) return err;
             if (!c.nscd_socket.empty() && c.nscd_socket[0] != '/') {
                 return Error{"expected an absolute socket path, or \"\" for off"};
             }
             return {};
         }},
        {"nscd-map-size",
         [](const toml::node& n, Config& c) -> Result<void> {
             std::optional<size_t> size;
             if (auto v = integer_of(n)) {
                 if (*v >= 0) size = static_cast<size_t>(*v);
             } else if (auto text = n.value<std::string>()) {
                 size = parse_size(*text);
             }
             if (!size || *size < (64u << 10) || *size > (size_t{1} << 30)) {
                 return Error{"expected a size from 64K to 1G (\"32M\")"};
             }
             c.nscd_map_size = *size;
             return {};
         }},
        {"max-connections-per-user",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = uint_of(n, c.max_connections_per_user, 1024); !err) return err;
             if (c.max_connections_per_user == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"nscd-other-databases",
         [](const toml::node& n, Config& c) -> Result<void> {
             auto text = n.value<std::string>();
             if (text && *text == "proxy") {
                 c.nscd_proxy_other_databases = true;
             } else if (text && *text == "decline") {
                 c.nscd_proxy_other_databases = false;
             } else {
                 return Error{"expected \"proxy\" or \"decline\""};
             }
             c.nscd_other_databases_set = true;
             return {};
         }},
        {"nscd-passwd", nscd_policy(&Config::nscd_passwd)},
        {"nscd-group", nscd_policy(&Config::nscd_group)},
        {"nscd-services", nscd_policy(&Config::nscd_services)},
        {"nscd-netgroup",
         [](const toml::node& n, Config& c) -> Result<void> {
             auto text = n.value<std::string>();
             if (text && (*text == "auto" || *text == "decline")) {
                 c.nscd_netgroup = *text;
                 return {};
             }
             return Error{
                 "netgroup is not served on the nscd socket (every nscd CVE of "
                 "2021-2024 lived there): expected \"auto\" or \"decline\""};
         }},
        {"nscd-positive-ttl", duration_s(&Config::nscd_positive_ttl)},
        {"nscd-negative-ttl", duration_s(&Config::nscd_negative_ttl)},
        {"metrics-listen",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = string_of(n, c.metrics_listen); !err) return err;
             if (!c.metrics_listen.empty() &&
                 !parse_socket_address(c.metrics_listen, std::nullopt)) {
                 return Error{"bad address '" + c.metrics_listen + "' (expected ADDR:PORT)"};
             }
             return {};
         }},
        {"metrics-allow", cidr_list(&Config::metrics_allow)},
        {"health-listen",
         [](const toml::node& n, Config& c) -> Result<void> {
             if (auto err = string_of(n, c.health_listen); !err) return err;
             if (!c.health_listen.empty() && !parse_socket_address(c.health_listen, std::nullopt)) {
                 return Error{"bad address '" + c.health_listen + "' (expected ADDR:PORT)"};
             }
             return {};
         }},
        {"user", string_field(&Config::user)},
        {"resolv-file", string_field(&Config::resolv_file)},
        {"flush-on-upstream-change", bool_field(&Config::flush_on_upstream_change)},
        {"forward-private-zones", bool_field(&Config::forward_private_zones)},
        {"chaos-version", string_field(&Config::chaos_version)},
        {"chaos-id", string_field(&Config::chaos_id)},
        {"hosts-file", string_field(&Config::hosts_file)},
        {"local-ttl", duration_s(&Config::local_ttl_s)},
        {"local-records",
         [](const toml::node& n, Config& c) {
             c.local_records.clear();
             return each_string(n, [&](const std::string& text) -> Result<void> {
                 std::string error;
                 auto record = parse_local_record(text, error);
                 if (!record) return Error{"'" + text + "': " + error};
                 c.local_records.push_back(*record);
                 return {};
             });
         }},
        {"log-level",
         [](const toml::node& n, Config& c) -> Result<void> {
             auto text = n.value<std::string>();
             static const std::pair<const char*, LogThreshold> kLevels[] = {
                 {"error", LogThreshold::Error},
                 {"warning", LogThreshold::Warning},
                 {"info", LogThreshold::Info},
                 {"debug", LogThreshold::Debug}};
             for (const auto& [name, level] : kLevels) {
                 if (text && *text == name) {
                     c.log_level = level;
                     return {};
                 }
             }
             return Error{"expected \"error\", \"warning\", \"info\" or \"debug\""};
         }},
        {"serve-stale", bool_field(&Config::serve_stale)},
        {"stale-ttl", duration_s(&Config::stale_ttl_s)},
        {"stale-answer-timeout", duration_ms(&Config::stale_answer_timeout_ms, 60'000)},
        {"serve-expired", bool_field(&Config::serve_expired)},
        {"prefetch", bool_field(&Config::prefetch)},
        {"cache-file", string_field(&Config::cache_file)},
        {"state-dir",
         [](const toml::node& n, Config& c) -> Result<void> {
             std::string text;
             if (auto err = string_of(n, text); !err) return err;
             if (text.empty() || text[0] != '/') return Error{"expected an absolute folder path"};
             c.state_dir = text;
             return {};
         }},
        {"rate-limit",
         [](const toml::node& n, Config& c) { return uint_of(n, c.rate_limit, 10'000'000); }},
        {"rate-limit-burst",
         [](const toml::node& n, Config& c) { return uint_of(n, c.rate_limit_burst, 10'000'000); }},
        {"rate-limit-action",
         [](const toml::node& n, Config& c) -> Result<void> {
             auto text = n.value<std::string>();
             if (text && *text == "drop") {
                 c.rate_limit_action = RateLimitAction::Drop;
             } else if (text && *text == "truncate") {
                 c.rate_limit_action = RateLimitAction::Truncate;
             } else {
                 return Error{"expected \"drop\" or \"truncate\""};
             }
             return {};
         }},
    };
    return table;
}

// Decimal digits only, as a TOML integer would be written (no sign: no setter takes one).
bool whole_number(const std::string& text, int64_t& out) {
    if (text.empty() || text.size() > 18) return false;
    int64_t n = 0;
    for (char ch : text) {
        if (ch < '0' || ch > '9') return false;
        n = n * 10 + (ch - '0');
    }
    out = n;
    return true;
}

std::string where(const std::string& path, const toml::source_region& source) {
    return path + ":" + std::to_string(source.begin.line) + ": ";
}

using SharedCacheSetter = std::function<Result<void>(const toml::node&, SharedCacheConfig&)>;

// The keys of the [shared-cache] table.
const std::map<std::string, SharedCacheSetter, std::less<>>& shared_cache_setters() {
    using S = SharedCacheConfig;
    static const std::map<std::string, SharedCacheSetter, std::less<>> table = {
        {"redis",
         [](const toml::node& n, S& s) -> Result<void> {
             std::string text;
             if (auto err = string_of(n, text); !err) return err;
             auto endpoint = parse_redis_endpoint(text);
             if (!endpoint) {
                 return Error{
                     "bad Redis address '" + text +
                     "' (expected ADDR:PORT, [ADDR6]:PORT or an absolute unix socket path; "
                     "no host names)"};
             }
             s.redis = *endpoint;
             return {};
         }},
        {"redis-cluster",
         [](const toml::node& n, S& s) -> Result<void> {
             s.redis_cluster.clear();
             auto err = each_string(n, [&](const std::string& text) -> Result<void> {
                 auto address = parse_socket_address(text, 6379);
                 if (!address) {
                     return Error{"bad Redis Cluster node '" + text +
                                  "' (expected ADDR:PORT or [ADDR6]:PORT; no host names)"};
                 }
                 s.redis_cluster.push_back(*address);
                 return {};
             });
             if (err && s.redis_cluster.empty()) return Error{"expected at least one node"};
             return err;
         }},
        {"timeout",
         [](const toml::node& n, S& s) -> Result<void> {
             uint64_t ms = 0;
             if (auto err = duration_of(n, ms); !err) return err;
             if (ms < 1 || ms > 10'000) return Error{"expected a duration from 1ms to 10s"};
             s.timeout_ms = static_cast<uint32_t>(ms);
             return {};
         }},
        {"key-prefix",
         [](const toml::node& n, S& s) -> Result<void> {
             if (auto err = string_of(n, s.key_prefix); !err) return err;
             if (s.key_prefix.size() > 256) return Error{"expected at most 256 bytes"};
             return {};
         }},
        {"user", [](const toml::node& n, S& s) { return string_of(n, s.user); }},
        {"password", [](const toml::node& n, S& s) { return string_of(n, s.password); }},
        {"max-inflight",
         [](const toml::node& n, S& s) -> Result<void> {
             if (auto err = uint_of(n, s.max_inflight, 1'000'000); !err) return err;
             if (s.max_inflight == 0) return Error{"expected 1 or more"};
             return {};
         }},
        {"write", [](const toml::node& n, S& s) { return bool_of(n, s.write); }},
    };
    return table;
}

std::optional<ConfigError> apply_shared_cache(const std::string& path, const toml::node& node,
                                              Config& config) {
    const toml::table* table = node.as_table();
    if (table == nullptr) {
        return ConfigError{where(path, node.source()) + "shared-cache: expected a table"};
    }
    SharedCacheConfig& shared = config.shared_cache;
    for (const auto& [key, value] : *table) {
        const auto& setters = shared_cache_setters();
        auto it = setters.find(key.str());
        if (it == setters.end()) {
            return ConfigError{where(path, key.source()) + "unknown option 'shared-cache." +
                               std::string(key.str()) + "'"};
        }
        if (auto err = it->second(value, shared); !err) {
            return ConfigError{where(path, value.source()) + "shared-cache." +
                               std::string(key.str()) + ": " + err.error()};
        }
    }
    if (shared.redis && !shared.redis_cluster.empty()) {
        return ConfigError{where(path, node.source()) +
                           "shared-cache: set redis or redis-cluster, not both"};
    }
    return std::nullopt;
}

}  // namespace

namespace {

Result<void> transport_of(const toml::node& node, ForwardTransport& out) {
    auto text = node.value<std::string>();
    if (text && *text == "udp") {
        out = ForwardTransport::Udp;
    } else if (text && *text == "tcp") {
        out = ForwardTransport::Tcp;
    } else {
        return Error{"expected \"udp\" or \"tcp\""};
    }
    return {};
}

// [[forward]]: an array of tables, each with domains, upstreams, no-cache, transport and its
// own max-ttl and negative-max-ttl. Messages point
// at the line of the table (or key) at fault.
std::optional<ConfigError> apply_forwards(const std::string& path, const toml::node& node,
                                          Config& config) {
    const toml::array* tables = node.as_array();
    if (tables == nullptr) {
        return ConfigError{where(path, node.source()) + "forward: expected [[forward]] tables"};
    }
    config.forwards.clear();
    for (const toml::node& item : *tables) {
        const toml::table* t = item.as_table();
        if (t == nullptr) {
            return ConfigError{where(path, item.source()) + "forward: expected a table"};
        }
        ForwardZone zone;
        zone.line = item.source().begin.line;
        for (const auto& [key, value] : *t) {
            const std::string k(key.str());
            Result<void> err;
            if (k == "domains") {
                err = each_string(value, [&](const std::string& text) -> Result<void> {
                    auto domain = normalize_domain(text);
                    if (!domain) return Error{"bad domain '" + text + "'"};
                    zone.domains.push_back(*domain);
                    return {};
                });
            } else if (k == "upstreams") {
                err = each_string(value, [&](const std::string& text) -> Result<void> {
                    auto address = parse_upstream_address(text);
                    if (!address) {
                        return Error{"bad address '" + text +
                                     "' (expected ADDR[:PORT], tls://ADDR[:PORT][#NAME] or "
                                     "https://ADDR[:PORT][/PATH][#NAME])"};
                    }
                    zone.upstreams.push_back(*address);
                    return {};
                });
                if (err && zone.upstreams.size() > kMaxUpstreams) {
                    err = Error{"at most " + std::to_string(kMaxUpstreams) + " upstreams"};
                }
            } else if (k == "no-cache") {
                bool no_cache = false;
                err = bool_of(value, no_cache);
                zone.cache = !no_cache;
            } else if (k == "transport") {
                err = transport_of(value, zone.transport);
            } else if (k == "max-ttl") {
                err = uint_of(value, zone.max_ttl, 0x7FFFFFFF);  // RFC 2181 §8: 31-bit TTLs
            } else if (k == "negative-max-ttl") {
                err = uint_of(value, zone.negative_max_ttl, 0x7FFFFFFF);
            } else {
                return ConfigError{where(path, key.source()) + "forward: unknown key '" + k + "'"};
            }
            if (!err) {
                return ConfigError{where(path, value.source()) + "forward." + k + ": " +
                                   err.error()};
            }
        }
        if (zone.domains.empty() || zone.upstreams.empty()) {
            return ConfigError{where(path, item.source()) +
                               "forward: needs domains = [...] and upstreams = [...]"};
        }
        for (const ForwardZone& other : config.forwards) {
            for (const std::string& d : zone.domains) {
                for (const std::string& e : other.domains) {
                    if (d == e) {
                        return ConfigError{where(path, item.source()) + "forward: domain " + d +
                                           " is already in the [[forward]] at line " +
                                           std::to_string(other.line)};
                    }
                }
            }
        }
        config.forwards.push_back(std::move(zone));
    }
    return std::nullopt;
}

std::optional<ConfigError> apply_table(const std::string& path, const toml::table& root,
                                       Config& config) {
    for (const auto& [key, node] : root) {
        if (key.str() == "shared-cache") {
            if (auto err = apply_shared_cache(path, node, config)) return err;
            continue;
        }
        if (key.str() == "forward") {
            if (auto err = apply_forwards(path, node, config)) return err;
            continue;
        }
        const auto& table = setters();
        auto it = table.find(key.str());
        if (it == table.end()) {
            return ConfigError{where(path, key.source()) + "unknown option '" +
                               std::string(key.str()) + "'"};
        }
        if (auto err = it->second(node, config); !err) {
            return ConfigError{where(path, node.source()) + std::string(key.str()) + ": " +
                               err.error()};
        }
    }
    if (config.min_ttl > config.max_ttl) {
        return ConfigError{path + ": min-ttl (" + std::to_string(config.min_ttl) +
                           ") is above max-ttl (" + std::to_string(config.max_ttl) + ")"};
    }
    if (config.failure_ttl_ms > config.failure_ttl_max_ms) {
        return ConfigError{path + ": failure-ttl is above failure-ttl-max"};
    }
    config.config_path = path;
    return std::nullopt;
}

std::optional<ConfigError> parse_error(const std::string& path, const toml::parse_error& e) {
    if (e.source().begin.line == 0) return ConfigError{path + ": " + std::string(e.description())};
    return ConfigError{where(path, e.source()) + std::string(e.description())};
}

}  // namespace

std::optional<ConfigError> load_config_file(const std::string& path, Config& config) {
    // Read by us, not toml::parse_file: a FIFO at the path would block the reload on the
    // thread that also reads SIGTERM, and /dev/zero would never end.
    std::string error;
    const auto text = read_small_file(path, kMaxConfigFileBytes, error);
    if (!text) return ConfigError{path + ": cannot read: " + error};
    return load_config_text(*text, path, config);
}

std::optional<ConfigError> load_config_text(std::string_view text, const std::string& source,
                                            Config& config) {
    toml::table root;
    try {
        root = toml::parse(text, source);
    } catch (const toml::parse_error& e) {
        return parse_error(source, e);
    }
    return apply_table(source, root, config);
}

Result<void> set_config_key(Config& config, std::string_view key, TextAs as,
                            const std::vector<std::string>& texts) {
    const auto& table = setters();
    auto it = table.find(key);
    if (it == table.end()) return Error{"unknown option '" + std::string(key) + "'"};
    if (as == TextAs::List) {
        toml::array list;
        for (const std::string& text : texts) list.push_back(text);
        return it->second(list, config);
    }
    if (texts.size() != 1) return Error{"expected one value"};
    if (int64_t n = 0; as == TextAs::Integer && whole_number(texts[0], n)) {
        return it->second(toml::value<int64_t>(n), config);
    }
    // Not a number: the setter says what it expected, as for a string in the file.
    return it->second(toml::value<std::string>(texts[0]), config);
}

}  // namespace nscache
