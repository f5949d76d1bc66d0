// SPDX-License-Identifier: BSD-3-Clause
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "config/config.h"

namespace nscache {
namespace {

class ConfigFileTest : public ::testing::Test {
  protected:
    std::string write(const std::string& text) {
        path_ = ::testing::TempDir() + "nscache_config_test.toml";
        std::ofstream(path_) << text;
        return path_;
    }
    void TearDown() override { std::remove(path_.c_str()); }
    std::string path_;
};

TEST_F(ConfigFileTest, ReadsEveryKindOfValue) {
    Config c;
    auto err = load_config_file(write(R"(
listen = ["127.0.0.1:5300", "[::1]:5300"]
upstream = ["192.0.2.1", "[2001:db8::1]:5353"]
threads = 3
cache-size = "16M"
allow = ["10.0.0.0/8"]
min-ttl = 5
max-ttl = 600
servfail-ttl = "2s"
query-timeout = "1500ms"
serve-stale = false
stale-ttl = "1h"
serve-expired = true
rate-limit = 100
rate-limit-action = "truncate"
metrics-allow = ["192.0.2.0/24", "2001:db8::/32"]
state-dir = "/srv/nscache"
)"),
                                c);
    ASSERT_FALSE(err) << err->message;
    EXPECT_EQ(c.listen.size(), 2u);
    EXPECT_EQ(c.listen[1].to_string(), "[::1]:5300");
    EXPECT_EQ(c.upstreams[0].to_string(), "192.0.2.1:53");
    EXPECT_EQ(c.upstreams[1].port(), 5353);
    EXPECT_EQ(c.threads, 3u);
    EXPECT_EQ(c.cache_size, 16u << 20);
    EXPECT_EQ(c.allow.size(), 1u);
    EXPECT_EQ(c.min_ttl, 5u);
    EXPECT_EQ(c.servfail_ttl, 2u);
    EXPECT_EQ(c.query_timeout_ms, 1500u);
    EXPECT_FALSE(c.serve_stale);
    EXPECT_EQ(c.stale_ttl_s, 3600u);
    EXPECT_TRUE(c.serve_expired);
    EXPECT_EQ(c.rate_limit, 100u);
    EXPECT_EQ(c.rate_limit_action, RateLimitAction::Truncate);
    ASSERT_EQ(c.metrics_allow.size(), 2u);
    EXPECT_EQ(c.metrics_allow[0].to_string(), "192.0.2.0/24");
    EXPECT_EQ(c.state_dir, "/srv/nscache");
}

TEST_F(ConfigFileTest, StateDirAndMetricsAllowNeedSaneValues) {
    Config c;
    auto err = load_config_file(write("state-dir = \"relative/dir\"\n"), c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("state-dir: expected an absolute folder path"), std::string::npos)
        << err->message;
    err = load_config_file(write("metrics-allow = [\"localhost\"]\n"), c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("bad network 'localhost'"), std::string::npos) << err->message;
}

TEST(ConfigText, NscdFrontIsOffByDefaultAndTakesItsKeys) {
    Config c;
    EXPECT_EQ(c.nscd_socket, "");  // never the host's /var/run/nscd unless asked
    EXPECT_TRUE(c.nscd_proxy_other_databases);
    ASSERT_FALSE(
        load_config_text("nscd-socket = \"/var/run/nscd/socket\"\n"
                         "nscd-other-databases = \"decline\"\n"
                         "nscd-map-size = \"1M\"\n",
                         "test", c));
    EXPECT_EQ(c.nscd_socket, "/var/run/nscd/socket");
    EXPECT_FALSE(c.nscd_proxy_other_databases);
    EXPECT_EQ(c.nscd_map_size, size_t{1} << 20);
    for (const char* bad : {"nscd-socket = \"relative\"\n", "nscd-other-databases = \"cache\"\n",
                            "nscd-map-size = \"4K\"\n"}) {
        Config d;
        EXPECT_TRUE(load_config_text(bad, "test", d)) << bad;
    }
}

TEST(ConfigText, NscdDatabasePoliciesAndTtls) {
    Config c;
    EXPECT_EQ(c.nscd_passwd, "");  // unset: nscd-other-databases if set, else auto
    EXPECT_FALSE(c.nscd_other_databases_set);
    EXPECT_EQ(c.nscd_positive_ttl, 600u);
    EXPECT_EQ(c.nscd_negative_ttl, 20u);
    ASSERT_FALSE(
        load_config_text("nscd-passwd = \"cache\"\n"
                         "nscd-group = \"proxy\"\n"
                         "nscd-services = \"decline\"\n"
                         "nscd-netgroup = \"decline\"\n"
                         "nscd-positive-ttl = \"1h\"\n"
                         "nscd-negative-ttl = \"5s\"\n"
                         "nscd-other-databases = \"proxy\"\n",
                         "test", c));
    EXPECT_EQ(c.nscd_passwd, "cache");
    EXPECT_EQ(c.nscd_group, "proxy");
    EXPECT_EQ(c.nscd_services, "decline");
    EXPECT_EQ(c.nscd_netgroup, "decline");
    EXPECT_EQ(c.nscd_positive_ttl, 3600u);
    EXPECT_EQ(c.nscd_negative_ttl, 5u);
    EXPECT_TRUE(c.nscd_other_databases_set);
    for (const char* bad : {"nscd-passwd = \"yes\"\n", "nscd-netgroup = \"cache\"\n",
                            "nscd-netgroup = \"proxy\"\n"}) {
        Config d;
        EXPECT_TRUE(load_config_text(bad, "test", d)) << bad;
    }
    Config d;
    auto err = load_config_text("nscd-netgroup = \"cache\"\n", "test", d);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("netgroup is not served"), std::string::npos) << err->message;
}

TEST(ConfigText, MaxConnectionsPerUser) {
    Config c;
    EXPECT_EQ(c.max_connections_per_user, 256u);  // a quarter of each socket's 1,024
    ASSERT_FALSE(load_config_text("max-connections-per-user = 1024\n", "test", c));
    EXPECT_EQ(c.max_connections_per_user, 1024u);
    for (const char* bad : {"max-connections-per-user = 0\n", "max-connections-per-user = 1025\n",
                            "max-connections-per-user = \"many\"\n"}) {
        Config d;
        EXPECT_TRUE(load_config_text(bad, "test", d)) << bad;
    }
}

TEST_F(ConfigFileTest, ErrorsNameFileAndLine) {
    Config c;
    auto err = load_config_file(write("threads = 2\ncache-size = \"lots\"\n"), c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(path_ + ":2:"), std::string::npos) << err->message;
    EXPECT_NE(err->message.find("cache-size"), std::string::npos);

    err = load_config_file(write("\n\nno-such-option = 1\n"), c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(":3: unknown option 'no-such-option'"), std::string::npos)
        << err->message;

    err = load_config_file(write("listen = [\"127.0.0.1\"]\n"), c);  // listen needs a port
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(":1:"), std::string::npos);

    err = load_config_file(write("threads = \n"), c);  // TOML syntax error
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(path_ + ":1"), std::string::npos) << err->message;

    err = load_config_file(write("min-ttl = 100\nmax-ttl = 10\n"), c);
    ASSERT_TRUE(err);
}

TEST_F(ConfigFileTest, NumbersOutOfRangeAreErrors) {
    // A float where a whole number belongs, even one no integer can hold (found by fuzz_config).
    Config c;
    auto err = load_config_file(write("max-ttl = 860000E0081\n"), c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(":1:"), std::string::npos) << err->message;
    EXPECT_TRUE(load_config_file(write("threads = 2.0\n"), c));
    EXPECT_TRUE(load_config_file(write("cache-size = 1e30\n"), c));
    // Seconds whose milliseconds do not fit 64 bits, and a negative duration.
    EXPECT_TRUE(load_config_file(write("query-timeout = 9223372036854775807\n"), c));
    EXPECT_TRUE(load_config_file(write("stale-ttl = -1\n"), c));
}

TEST_F(ConfigFileTest, MissingFileIsAnError) {
    Config c;
    EXPECT_TRUE(load_config_file("/nonexistent/nscache.toml", c));
}

TEST_F(ConfigFileTest, ExampleConfigIsValid) {
    Config c;
    auto err = load_config_file(NSCACHE_SOURCE_DIR "/nscache.toml.example", c);
    ASSERT_FALSE(err) << err->message;
    Config defaults;
    EXPECT_EQ(c.cache_size, defaults.cache_size);  // the example shows the defaults
    EXPECT_EQ(c.query_timeout_ms, defaults.query_timeout_ms);
    EXPECT_EQ(c.stale_ttl_s, defaults.stale_ttl_s);
    EXPECT_EQ(c.stale_answer_timeout_ms, defaults.stale_answer_timeout_ms);
    EXPECT_FALSE(c.shared_cache.enabled());
    EXPECT_EQ(c.shared_cache.timeout_ms, defaults.shared_cache.timeout_ms);
    EXPECT_EQ(c.shared_cache.key_prefix, defaults.shared_cache.key_prefix);
    EXPECT_EQ(c.shared_cache.max_inflight, defaults.shared_cache.max_inflight);
}

TEST_F(ConfigFileTest, SharedCacheIsOffUnlessItNamesRedis) {
    Config c;
    ASSERT_FALSE(load_config_file(write("[shared-cache]\ntimeout = \"3ms\"\n"), c));
    EXPECT_FALSE(c.shared_cache.enabled());
    EXPECT_EQ(c.shared_cache.timeout_ms, 3u);
    EXPECT_FALSE(Config{}.shared_cache.enabled());
}

TEST_F(ConfigFileTest, SharedCacheTable) {
    Config c;
    auto err = load_config_file(write(R"(
threads = 2
[shared-cache]
redis = "/run/redis/redis.sock"
timeout = "8ms"
key-prefix = "dns:"
user = "nscache"
password = "secret"
max-inflight = 64
write = false
)"),
                                c);
    ASSERT_FALSE(err) << err->message;
    EXPECT_EQ(c.threads, 2u);
    const SharedCacheConfig& s = c.shared_cache;
    ASSERT_TRUE(s.enabled());
    EXPECT_EQ(s.redis->unix_path, "/run/redis/redis.sock");
    EXPECT_EQ(s.timeout_ms, 8u);
    EXPECT_EQ(s.key_prefix, "dns:");
    EXPECT_EQ(s.user, "nscache");
    EXPECT_EQ(s.password, "secret");
    EXPECT_EQ(s.max_inflight, 64u);
    EXPECT_FALSE(s.write);

    Config cluster;
    ASSERT_FALSE(load_config_file(
        write("[shared-cache]\nredis-cluster = [\"10.0.0.1:7000\", \"[2001:db8::1]\"]\n"),
        cluster));
    ASSERT_EQ(cluster.shared_cache.redis_cluster.size(), 2u);
    EXPECT_EQ(cluster.shared_cache.redis_cluster[1].to_string(), "[2001:db8::1]:6379");
    Config plain;
    ASSERT_FALSE(load_config_file(write("[shared-cache]\nredis = \"127.0.0.1\"\n"), plain));
    EXPECT_EQ(plain.shared_cache.redis->to_string(), "127.0.0.1:6379");
}

TEST_F(ConfigFileTest, SharedCacheMistakesAreClearErrors) {
    const std::pair<const char*, const char*> cases[] = {
        {"[shared-cache]\nredis = \"redis.example:6379\"\n", "no host names"},
        {"[shared-cache]\nredis = \"127.0.0.1:1\"\nredis-cluster = [\"127.0.0.1:2\"]\n",
         "not both"},
        {"[shared-cache]\nredis-cluster = []\n", "at least one node"},
        {"[shared-cache]\ntimeout = \"0ms\"\n", "from 1ms to 10s"},
        {"[shared-cache]\ntimeout = \"1m\"\n", "from 1ms to 10s"},
        {"[shared-cache]\nmax-inflight = 0\n", "1 or more"},
        {"[shared-cache]\nwrite = \"yes\"\n", "true or false"},
        {"[shared-cache]\nport = 6379\n", "unknown option 'shared-cache.port'"},
        {"shared-cache = \"127.0.0.1\"\n", "expected a table"},
    };
    for (const auto& [text, message] : cases) {
        Config c;
        auto err = load_config_file(write(text), c);
        ASSERT_TRUE(err) << text;
        EXPECT_NE(err->message.find(message), std::string::npos) << err->message;
        EXPECT_NE(err->message.find(".toml:"), std::string::npos) << err->message;
    }
}

TEST(ConfigValues, SizesAndDurations) {
    EXPECT_EQ(parse_size("65536"), 65536u);
    EXPECT_EQ(parse_size("64K"), 65536u);
    EXPECT_EQ(parse_size("2G"), size_t{2} << 30);
    EXPECT_FALSE(parse_size("12X"));
    EXPECT_FALSE(parse_size("M"));
    EXPECT_EQ(parse_duration_ms("1800ms"), 1800u);
    EXPECT_EQ(parse_duration_ms("2"), 2000u);
    EXPECT_EQ(parse_duration_ms("1d"), 86'400'000u);
    EXPECT_FALSE(parse_duration_ms("soon"));
}

TEST(ResolveDefaults, SkipsOwnAddressInResolvConf) {
    const std::string path = ::testing::TempDir() + "nscache_resolv.conf";
    std::ofstream(path) << "# test\nnameserver 127.0.0.1\nnameserver 192.0.2.53\nsearch example\n";
    Config c;
    ASSERT_FALSE(resolve_defaults(c, path));
    ASSERT_EQ(c.upstreams.size(), 1u);  // 127.0.0.1:53 is where we listen by default
    EXPECT_EQ(c.upstreams[0].to_string(), "192.0.2.53:53");
    EXPECT_TRUE(c.listen_is_default);
    EXPECT_GT(c.threads, 0u);
    ASSERT_EQ(c.metrics_allow.size(), 2u);  // loopback only
    EXPECT_EQ(c.metrics_allow[0].to_string(), "127.0.0.0/8");
    EXPECT_EQ(c.metrics_allow[1].to_string(), "::1/128");

    std::ofstream(path) << "nameserver 127.0.0.1\n";
    Config only_self;
    EXPECT_TRUE(resolve_defaults(only_self, path));
    std::remove(path.c_str());
}

}  // namespace
}  // namespace nscache

namespace nscache {
namespace {

TEST(UpstreamAddress, PlainAndTlsForms) {
    auto plain = parse_upstream_address("192.0.2.1");
    ASSERT_TRUE(plain);
    EXPECT_FALSE(plain->tls);
    EXPECT_EQ(plain->port(), 53);
    auto tls = parse_upstream_address("tls://192.0.2.1#dns.example");
    ASSERT_TRUE(tls);
    EXPECT_TRUE(tls->tls);
    EXPECT_EQ(tls->port(), 853);
    EXPECT_EQ(tls->auth_name, "dns.example");
    EXPECT_EQ(tls->to_string(), "tls://192.0.2.1:853#dns.example");
    auto v6 = parse_upstream_address("tls://[2001:db8::1]:8853");
    ASSERT_TRUE(v6);
    EXPECT_EQ(v6->port(), 8853);
    EXPECT_TRUE(v6->auth_name.empty());
    EXPECT_FALSE(parse_upstream_address("tls://192.0.2.1#"));
    EXPECT_FALSE(parse_upstream_address("tls://192.0.2.1#bad name"));
    EXPECT_FALSE(parse_upstream_address("ftp://192.0.2.1"));
}

TEST(UpstreamAddress, HttpsForms) {
    auto doh = parse_upstream_address("https://192.0.2.1");
    ASSERT_TRUE(doh);
    EXPECT_TRUE(doh->tls);  // authenticated as tls:// is
    EXPECT_TRUE(doh->https);
    EXPECT_EQ(doh->port(), 443);
    EXPECT_EQ(doh->path, "/dns-query");
    EXPECT_TRUE(doh->auth_name.empty());
    EXPECT_EQ(doh->to_string(), "https://192.0.2.1:443/dns-query");

    auto full = parse_upstream_address("https://[2001:db8::1]:8443/resolve/v1#dns.example");
    ASSERT_TRUE(full);
    EXPECT_EQ(full->port(), 8443);
    EXPECT_EQ(full->path, "/resolve/v1");
    EXPECT_EQ(full->auth_name, "dns.example");
    EXPECT_EQ(full->to_string(), "https://[2001:db8::1]:8443/resolve/v1#dns.example");
    auto again = parse_upstream_address(full->to_string());
    ASSERT_TRUE(again);
    EXPECT_TRUE(*again == *full);

    auto named = parse_upstream_address("https://127.0.0.1#doh.test");
    ASSERT_TRUE(named);
    EXPECT_EQ(named->path, "/dns-query");
    EXPECT_EQ(named->auth_name, "doh.test");

    // Distinct from the same address over DoT: a different server.
    EXPECT_FALSE(*parse_upstream_address("tls://192.0.2.1:443") == *doh);
    EXPECT_FALSE(*parse_upstream_address("https://192.0.2.1/other") == *doh);

    EXPECT_FALSE(parse_upstream_address("https://"));
    EXPECT_FALSE(parse_upstream_address("https://192.0.2.1#"));
    EXPECT_FALSE(parse_upstream_address("https://192.0.2.1/path with space"));
    EXPECT_FALSE(parse_upstream_address("https://192.0.2.1/dns-query?dns=AAAB"));  // no query
    EXPECT_FALSE(parse_upstream_address("https://192.0.2.1:99999"));
    EXPECT_FALSE(
        parse_upstream_address("https://dns.example/dns-query"));  // an address, not a name
}

TEST(UpstreamAddress, HttpsInTheFileAndForwards) {
    Config c;
    auto err = load_config_text(
        "upstream = [\"https://127.0.0.1:8443/q#doh.test\"]\n"
        "[[forward]]\ndomains = [\"example\"]\nupstreams = [\"https://127.0.0.2\"]\n",
        "t.toml", c);
    ASSERT_FALSE(err) << err->message;
    ASSERT_EQ(c.upstreams.size(), 1u);
    EXPECT_TRUE(c.upstreams[0].https);
    EXPECT_EQ(c.upstreams[0].path, "/q");
    EXPECT_EQ(c.upstreams[0].auth_name, "doh.test");
    ASSERT_EQ(c.forwards.size(), 1u);
    ASSERT_EQ(c.forwards[0].upstreams.size(), 1u);
    EXPECT_TRUE(c.forwards[0].upstreams[0].https);
    EXPECT_EQ(c.forwards[0].upstreams[0].port(), 443);
    Config bad;
    auto error = load_config_text("upstream = [\"https://127.0.0.1/a b\"]\n", "t.toml", bad);
    ASSERT_TRUE(error);
    EXPECT_NE(error->message.find("https://ADDR[:PORT][/PATH][#NAME]"), std::string::npos);
}

TEST(UpstreamAddress, TlsSettingsFromTheFile) {
    Config c;
    const std::string pin = "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=";  // SHA-256 of ""
    ASSERT_FALSE(
        load_config_text("upstream = [\"tls://192.0.2.1#dns.example\"]\n"
                         "tls-auth = \"opportunistic\"\n"
                         "tls-ca-file = \"/etc/ca.pem\"\n"
                         "tls-pin = [\"192.0.2.1 " +
                             pin + "\"]\n",
                         "test", c));
    ASSERT_EQ(c.upstreams.size(), 1u);
    EXPECT_TRUE(c.upstreams[0].tls);
    EXPECT_EQ(c.tls_auth, TlsAuth::Opportunistic);
    EXPECT_EQ(c.tls_ca_file, "/etc/ca.pem");
    ASSERT_EQ(c.tls_pins.size(), 1u);
    EXPECT_EQ(c.tls_pins[0].address.port(), 853);
    EXPECT_EQ(static_cast<uint8_t>(c.tls_pins[0].sha256[0]), 0xe3);
    auto err = load_config_text("tls-pin = [\"192.0.2.1 AAAA\"]\n", "test", c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("bad pin"), std::string::npos);
    err = load_config_text("tls-auth = \"sometimes\"\n", "test", c);
    ASSERT_TRUE(err);
    err = load_config_text("upstream = [\"tls://x#y\"]\n", "test", c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("bad upstream"), std::string::npos);
}

}  // namespace
}  // namespace nscache

namespace nscache {
namespace {

// What the file says after "FILE:LINE: KEY: " for `toml` (one line).
std::string file_message(const std::string& toml, const std::string& key) {
    Config c;
    const auto err = load_config_text(toml, "test", c);
    if (!err) return "(accepted)";
    const std::string head = "test:1: " + key + ": ";
    EXPECT_EQ(err->message.rfind(head, 0), 0u) << err->message;
    return err->message.substr(head.size());
}

std::string flag_message(const std::string& key, TextAs as, const std::vector<std::string>& texts) {
    Config c;
    const Result<void> set = set_config_key(c, key, as, texts);
    return set ? "(accepted)" : set.error();
}

// A flag of `nscache serve` and the file's key of the same name: one value, one message.
TEST(SetConfigKey, GivesTheFilesMessageForTheSameValue) {
    EXPECT_EQ(flag_message("threads", TextAs::Integer, {"2000"}),
              file_message("threads = 2000", "threads"));
    EXPECT_EQ(flag_message("threads", TextAs::Integer, {"many"}),
              file_message("threads = \"many\"", "threads"));
    EXPECT_EQ(flag_message("cache-size", TextAs::String, {"12X"}),
              file_message("cache-size = \"12X\"", "cache-size"));
    EXPECT_EQ(flag_message("listen", TextAs::List, {"999.1.1.1:53"}),
              file_message("listen = [\"999.1.1.1:53\"]", "listen"));
    EXPECT_EQ(flag_message("upstream", TextAs::List, {"300.0.0.1"}),
              file_message("upstream = [\"300.0.0.1\"]", "upstream"));
    EXPECT_EQ(flag_message("nscd-socket", TextAs::String, {"relative"}),
              file_message("nscd-socket = \"relative\"", "nscd-socket"));
    EXPECT_EQ(flag_message("no-such-key", TextAs::String, {"x"}), "unknown option 'no-such-key'");
}

TEST(SetConfigKey, SetsTheValueAsTheFileWould) {
    Config c;
    ASSERT_TRUE(set_config_key(c, "threads", TextAs::Integer, {"3"}));
    EXPECT_EQ(c.threads, 3u);
    ASSERT_TRUE(set_config_key(c, "cache-size", TextAs::String, {"64M"}));
    EXPECT_EQ(c.cache_size, size_t{64} << 20);
    ASSERT_TRUE(set_config_key(c, "control", TextAs::String, {"123"}));  // a path, not a number
    EXPECT_EQ(c.control, "123");
    ASSERT_TRUE(set_config_key(c, "listen", TextAs::List, {"127.0.0.1:53", "[::1]:53"}));
    EXPECT_EQ(c.listen.size(), 2u);
    std::vector<std::string> too_many(kMaxUpstreams + 1, "192.0.2.1");
    EXPECT_FALSE(set_config_key(c, "upstream", TextAs::List, too_many));
}

TEST(ConfigText, ForwardTransportAndTtlCaps) {
    Config c;
    auto err = load_config_text(
        "[[forward]]\ndomains = [\"cluster.local\"]\nupstreams = [\"10.96.0.10\"]\n"
        "transport = \"tcp\"\nmax-ttl = 30\nnegative-max-ttl = 5\n"
        "[[forward]]\ndomains = [\"corp.example\"]\nupstreams = [\"10.0.0.1\"]\n",
        "t.toml", c);
    ASSERT_FALSE(err) << err->message;
    ASSERT_EQ(c.forwards.size(), 2u);
    EXPECT_EQ(c.forwards[0].transport, ForwardTransport::Tcp);
    EXPECT_EQ(c.forwards[0].max_ttl, 30u);
    EXPECT_EQ(c.forwards[0].negative_max_ttl, 5u);
    // Defaults: UDP, and no caps of its own.
    EXPECT_EQ(c.forwards[1].transport, ForwardTransport::Udp);
    EXPECT_EQ(c.forwards[1].max_ttl, kNoTtlCap);
    EXPECT_EQ(c.forwards[1].negative_max_ttl, kNoTtlCap);
}

TEST(ConfigText, BadForwardTransportAndTtlCapsSayWhatWasExpected) {
    const std::pair<const char*, const char*> cases[] = {
        {"transport = \"quic\"", ":4: forward.transport: expected \"udp\" or \"tcp\""},
        {"transport = true", ":4: forward.transport: expected \"udp\" or \"tcp\""},
        {"max-ttl = -1", ":4: forward.max-ttl: expected a whole number from 0 to 2147483647"},
        {"max-ttl = 2147483648", "forward.max-ttl: expected a whole number from 0 to 2147483647"},
        {"negative-max-ttl = \"1h\"", "forward.negative-max-ttl: expected a whole number"},
        {"max_ttl = 3", ":4: forward: unknown key 'max_ttl'"},
    };
    for (const auto& [line, message] : cases) {
        Config c;
        const std::string text = std::string("[[forward]]\ndomains = [\"a.test\"]\n") +
                                 "upstreams = [\"10.0.0.1\"]\n" + line + "\n";
        auto err = load_config_text(text, "t.toml", c);
        ASSERT_TRUE(err) << line;
        EXPECT_NE(err->message.find(message), std::string::npos) << err->message;
    }
}

TEST(ConfigText, HealthListen) {
    Config c;
    ASSERT_FALSE(load_config_text("health-listen = \"169.254.20.10:8080\"\n", "t.toml", c));
    EXPECT_EQ(c.health_listen, "169.254.20.10:8080");
    auto err = load_config_text("health-listen = \"169.254.20.10\"\n", "t.toml", c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find(
                  "t.toml:1: health-listen: bad address '169.254.20.10' (expected ADDR:PORT)"),
              std::string::npos)
        << err->message;
    err = load_config_text("health-listen = 8080\n", "t.toml", c);
    ASSERT_TRUE(err);
    EXPECT_NE(err->message.find("health-listen: expected a string"), std::string::npos);
}

}  // namespace
}  // namespace nscache
