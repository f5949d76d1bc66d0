// SPDX-License-Identifier: BSD-3-Clause
// The daemon's settings: one plain aggregate with a default for every option, filled from the
// TOML file and then from command-line flags. Tests build it with designated initialisers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "config/address.h"

namespace nscache {

enum class RateLimitAction { Drop, Truncate };

// How a [[forward]] rule's plain upstreams are asked (tls:// ones are always asked over TLS).
enum class ForwardTransport : uint8_t {
    Udp,  // UDP first, TCP after TC=1 or after every UDP try timed out
    Tcp,  // every query over TCP (pipelined, kept open), as NodeLocal DNSCache forwards
};

// No cap of a rule's own: only the global max-ttl / negative-max-ttl apply.
inline constexpr uint32_t kNoTtlCap = UINT32_MAX;

// One [[forward]] table: queries for names at or under `domains` go to `upstreams` (split
// DNS). The longest matching domain wins; "." is the default set.
struct ForwardZone {
    std::vector<std::string> domains;  // lower-case text with a trailing dot: "corp.example."
    std::vector<UpstreamAddress> upstreams;
    bool cache = true;  // no-cache = true: answers for these names are never kept
    ForwardTransport transport = ForwardTransport::Udp;
    // Caps on the TTLs cached for the rule's names, over the global ones (the smaller wins).
    uint32_t max_ttl = kNoTtlCap;
    uint32_t negative_max_ttl = kNoTtlCap;
    size_t line = 0;  // where the table starts in the config file, for messages
};

// One entry of `local-records`: "NAME TYPE VALUE", answered by nscache itself.
struct LocalRecord {
    std::string name;   // lower-case text with a trailing dot
    uint16_t type = 0;  // A, AAAA, CNAME, PTR or TXT
    std::string value;  // the address, target name (trailing dot), or the TXT text
};

enum class LogThreshold { Error, Warning, Info, Debug };

// More upstreams than this are a configuration error (the health bookkeeping is sized for it).
inline constexpr size_t kMaxUpstreams = 64;

// A Redis server: an IP address and port, or a unix socket path. Never a host name: resolving
// one would be a blocking lookup on the daemon's own threads, maybe through itself.
struct RedisEndpoint {
    SocketAddress address;  // when unix_path is empty
    std::string unix_path;

    std::string to_string() const { return unix_path.empty() ? address.to_string() : unix_path; }
    bool operator==(const RedisEndpoint&) const = default;
};

// "127.0.0.1:6379", "[::1]:6379", "127.0.0.1" (port 6379) or "/run/redis/redis.sock".
std::optional<RedisEndpoint> parse_redis_endpoint(std::string_view text);

// The optional second-level cache in Redis behind the local one ([shared-cache]). Off unless
// `redis` or `redis_cluster` is set.
struct SharedCacheConfig {
    std::optional<RedisEndpoint> redis;        // one server
    std::vector<SocketAddress> redis_cluster;  // seed nodes of a Redis Cluster
    // The most a lookup waits for Redis before the miss goes upstream.
    uint32_t timeout_ms = 5;
    std::string key_prefix = "nscache:";
    std::string user;              // AUTH user (Redis 6 ACL); empty: AUTH with the password alone
    std::string password;          // empty: no AUTH
    uint32_t max_inflight = 1000;  // Redis requests one thread keeps outstanding at most
    bool write = true;             // false: read the tier, never write to it

    bool enabled() const { return redis.has_value() || !redis_cluster.empty(); }
    bool operator==(const SharedCacheConfig&) const = default;
};

struct Config {
    std::vector<SocketAddress> listen;  // empty: 127.0.0.1:53 and [::1]:53
    // DNS over TLS (RFC 7858; default port 853) and DNS over HTTPS (RFC 8484; default port
    // 443) listeners: none by default. Either needs tls_certificate and tls_private_key (PEM;
    // the certificate file may hold the chain), re-read on reload.
    std::vector<SocketAddress> listen_tls;
    std::vector<SocketAddress> listen_https;
    std::string tls_certificate;
    std::string tls_private_key;
    std::string https_path = "/dns-query";   // the DoH URI path; any other path is 404
    std::vector<UpstreamAddress> upstreams;  // empty: from resolv-file, else /etc/resolv.conf
    std::vector<ForwardZone> forwards;       // [[forward]] tables, in file order
    // Where upstreams come from when none is given (dnsmasq's resolv-file): empty means
    // /etc/resolv.conf. Watched: a changed file switches upstreams within a second.
    std::string resolv_file;
    bool flush_on_upstream_change = false;
    // RFC 6303 private reverse zones and RFC 6761 "local." and "invalid." are answered
    // NXDOMAIN here instead of leaking upstream; true forwards them ("localhost." is always
    // answered here).
    bool forward_private_zones = false;
    // CHAOS-class version.bind/version.server and id.server/hostname.bind: answered with
    // these strings, or REFUSED when empty. Never forwarded.
    std::string chaos_version;
    std::string chaos_id;
    std::vector<LocalRecord> local_records;
    uint32_t local_ttl_s = 300;             // TTL of local records and /etc/hosts names
    std::string hosts_file = "/etc/hosts";  // its names answered over DNS; "" = off
    LogThreshold log_level = LogThreshold::Info;
    unsigned threads = 0;  // 0: one per online CPU
    size_t cache_size = size_t{64} << 20;
    std::vector<Cidr> allow;  // empty: loopback only
    // Clients whose queries without RD (RFC 1034 §4.3.1: answer from what is held, never
    // recurse) are answered from the cache. To anyone else such a query is cache snooping:
    // it tells which names other clients asked for, and when. Empty: nobody.
    std::vector<Cidr> allow_snoop = {*parse_cidr("127.0.0.0/8"), *parse_cidr("::1/128")};

    uint32_t min_ttl = 0;
    uint32_t max_ttl = 86400;
    uint32_t negative_max_ttl = 3600;
    uint32_t servfail_ttl = 3;
    // RFC 9520 §3.2: a question no upstream answered is answered SERVFAIL at once for this
    // long, doubling for each repeated failure up to the max.
    uint32_t failure_ttl_ms = 5'000;
    uint32_t failure_ttl_max_ms = 60'000;

    uint32_t query_timeout_ms = 2000;
    uint16_t edns_buffer_size = 1232;
    uint32_t max_tcp_connections = 1024;
    uint32_t max_tcp_per_client = 64;  // connections from one client address
    uint32_t tcp_idle_timeout_ms = 10000;
    uint32_t tcp_read_timeout_ms = 5000;   // a query's first byte to its last
    uint32_t max_upstream_queries = 4096;  // in flight per worker; more get SERVFAIL at once
    // The worker's pool of UDP sockets for upstream queries: idle sockets kept open per
    // address family (each on its own random port), and queries a socket carries (one at a
    // time) before it is closed and replaced by one on a fresh port.
    uint32_t upstream_sockets = 64;
    uint32_t upstream_socket_uses = 64;
    // DNS cookies (RFC 7873) on upstream UDP queries (BIND's send-cookie). Off for a path
    // whose boxes mishandle the option in ways the FORMERR retry cannot see.
    bool upstream_cookies = true;
    // Upstream TCP and TLS connections (one per worker and server, pipelined) close after
    // this long with nothing outstanding.
    uint32_t upstream_idle_timeout_ms = 10'000;
    // DNS over TLS upstreams (tls://): the CA certificates to trust (empty: the system's),
    // whether an unauthenticated server may be used (and cleartext when TLS fails), and SPKI
    // pins that replace the certificate check for the servers they name.
    std::string tls_ca_file;
    TlsAuth tls_auth = TlsAuth::Strict;
    std::vector<SpkiPin> tls_pins;

    std::string control = "/run/nscache/control.sock";
    // The NSS module's socket (nss/protocol.h), which also hands out the shared map (a memfd,
    // no path); nss = false turns both off.
    bool nss = true;
    std::string nss_socket = "/run/nscache/nss.sock";
    // glibc's nscd socket for the hosts database (docs/nscd.md); empty: off. The installed
    // configuration sets /var/run/nscd/socket; the built-in default never touches it.
    std::string nscd_socket;
    // Other databases asked on the nscd socket (passwd, group, services): answered through
    // the daemon's own NSS lookups, uncached (true, "proxy"), or declined (false, "decline":
    // glibc asks NSS itself at once).
    bool nscd_proxy_other_databases = true;
    bool nscd_other_databases_set = false;  // then it is the default of the four below
    // Each database's policy on the nscd socket (docs/nscd.md): "auto", "cache", "proxy",
    // "decline"; empty: unset (nscd-other-databases if set, else "auto"). Netgroup: "auto"
    // or "decline", both declining.
    std::string nscd_passwd;
    std::string nscd_group;
    std::string nscd_services;
    std::string nscd_netgroup;
    // How long a cached passwd/group/services answer from a source that is not a file lives
    // (files' answers too: the file watch flushes them at once on a change), and a not-found.
    uint32_t nscd_positive_ttl = 600;
    uint32_t nscd_negative_ttl = 20;
    // The nscd map's data area (a sparse memfd): when full, its live records move to a new one.
    size_t nscd_map_size = size_t{32} << 20;
    // Connections one user (SO_PEERCRED uid) may hold open at once on the NSS socket, and on
    // the nscd socket, of their 1,024 each: the sockets are 0666, and one user's idle clients
    // must not lock out everyone else's lookups. Root has no such share.
    uint32_t max_connections_per_user = 256;
    std::string control_group;
    std::string metrics_listen;
    std::vector<Cidr> metrics_allow;  // empty: loopback only
    // GET /health and /ready (control/health.h); the same address as metrics-listen serves
    // them on the metrics socket (and metrics-allow applies), another one to any client.
    std::string health_listen;
    std::string user;

    bool serve_stale = true;
    uint32_t stale_ttl_s = 86400;
    uint32_t stale_answer_timeout_ms = 1800;
    bool serve_expired = false;  // answer stale entries at once and refresh in the background
    bool prefetch = true;
    std::string cache_file;
    // Where `nscache dump|load` may read and write: relative names are taken inside it, and
    // nothing outside it is opened (the daemon often runs as root).
    std::string state_dir = "/var/lib/nscache";

    uint32_t rate_limit = 0;
    uint32_t rate_limit_burst = 0;
    RateLimitAction rate_limit_action = RateLimitAction::Drop;

    SharedCacheConfig shared_cache;

    // The source of the file the settings came from, for messages.
    std::string config_path;
    // Set by resolve_defaults when `listen` was not given: a default address the machine
    // lacks (no IPv6) is then skipped with a warning instead of stopping the daemon.
    bool listen_is_default = false;
    // Set by resolve_defaults when the default upstreams came from resolv_conf_path (which
    // the daemon then watches).
    bool upstreams_from_resolv_conf = false;
    std::string resolv_conf_path;
};

// An error at the configuration edge: a message ready for the user ("FILE:LINE: ...").
struct ConfigError {
    std::string message;
};

// What the config file and a resolv.conf may hold: far above any real one (a few KiB), and
// small enough that a wrong path costs no memory.
inline constexpr size_t kMaxConfigFileBytes = size_t{1} << 20;

// Reads a TOML file over `config`. Unknown keys and bad values are errors, and so is a path
// that is not a regular file (a FIFO, a device: read_small_file) or one over the bound.
std::optional<ConfigError> load_config_file(const std::string& path, Config& config);
// The same for text already in memory; `source` names it in messages.
std::optional<ConfigError> load_config_text(std::string_view text, const std::string& source,
                                            Config& config);

// How the text of a command-line flag stands for a TOML value: a string, an integer (when it
// is written as one; otherwise passed as a string, which the key's setter refuses in its own
// words), or an array of strings (one per time the flag was given).
enum class TextAs { String, Integer, List };

// Sets the top-level `key` from command-line text through the same setter as the file's key,
// so that one value gives one message whichever way it comes. The error is the setter's
// message, without FILE:LINE or the key (the caller names the flag).
Result<void> set_config_key(Config& config, std::string_view key, TextAs as,
                            const std::vector<std::string>& texts);

// The defaults that depend on the machine: listen addresses, upstreams from resolv.conf
// (minus our own listen addresses), thread count. Call after file and flags are applied.
std::optional<ConfigError> resolve_defaults(Config& config, const std::string& resolv_conf_path);

// The names (as in the file) of the options whose values differ between `a` and `b`, among
// those a reload applies.
std::vector<std::string> changed_options(const Config& a, const Config& b);

// The `nameserver` lines of a resolv.conf-format file, minus addresses nscache listens on
// itself; nullopt with `error` set when it cannot be read or names none.
std::optional<std::vector<SocketAddress>> read_resolv_nameservers(
    const std::string& path, const std::vector<SocketAddress>& listen, std::string& error);

// "www.Example.com" or "www.example.com." -> "www.example.com."; nullopt unless every label
// is 1 to 63 bytes of letters, digits, '-', '_' (and the whole at most 253 bytes). "." is
// the root.
std::optional<std::string> normalize_domain(std::string_view text);

// "printer.lan A 192.168.1.9", "alias.lan CNAME printer.lan", "info.lan TXT some text".
std::optional<LocalRecord> parse_local_record(std::string_view text, std::string& error);

// "65536", "64K", "64M", "1G" -> bytes.
std::optional<size_t> parse_size(std::string_view text);
// "500ms", "2s", "5m", "1h", "1d", or a bare number of seconds -> milliseconds.
std::optional<uint64_t> parse_duration_ms(std::string_view text);

}  // namespace nscache
