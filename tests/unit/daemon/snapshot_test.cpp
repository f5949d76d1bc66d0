// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/snapshot.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>

#include <memory>
#include <string>
#include <thread>

#include "daemon/supervisor.h"
#include "daemon_test_support.h"

namespace nscache::daemon {
namespace {

using testing::BlockedSignals;
using testing::ConfigFiles;
using testing::start_snapshot;

constexpr const char* kConfig =
    "upstream = [\"192.0.2.1\", \"192.0.2.2:5300\"]\n"
    "allow = [\"127.0.0.0/8\", \"10.0.0.0/8\"]\n"
    "rate-limit = 100\n"
    "query-timeout = \"1500ms\"\n"
    "min-ttl = 30\n"
    "max-tcp-per-client = 7\n"
    "metrics-listen = \"127.0.0.1:9153\"\n"
    "metrics-allow = [\"192.0.2.0/24\"]\n"
    "chaos-version = \"test\"\n"
    "[[forward]]\n"
    "domains = [\"corp.example\"]\n"
    "upstreams = [\"10.0.0.53\"]\n";

bool allows(const server::AccessList& list, const char* address) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    inet_pton(AF_INET, address, &sa.sin_addr);
    return list.allows(reinterpret_cast<const sockaddr*>(&sa));
}

// Every field a thread reads, compared one by one (the types have no operator==).
void expect_same(const server::Settings& a, const server::Settings& b) {
    EXPECT_TRUE(changed_options(a.config, b.config).empty());
    EXPECT_EQ(a.routing->upstream_count(), b.routing->upstream_count());
    EXPECT_EQ(a.routing->rules().size(), b.routing->rules().size());
    EXPECT_EQ(a.routing->local_names(), b.routing->local_names());
    EXPECT_EQ(a.routing->local_zones(), b.routing->local_zones());
    const upstream::ResolverOptions& x = a.resolver;
    const upstream::ResolverOptions& y = b.resolver;
    EXPECT_EQ(x.query_timeout_ms, y.query_timeout_ms);
    EXPECT_EQ(x.max_outstanding, y.max_outstanding);
    EXPECT_EQ(x.failures.initial_ms, y.failures.initial_ms);
    EXPECT_EQ(x.failures.max_ms, y.failures.max_ms);
    EXPECT_EQ(x.edns_buffer_size, y.edns_buffer_size);
    EXPECT_EQ(x.ttl.min_ttl, y.ttl.min_ttl);
    EXPECT_EQ(x.ttl.max_ttl, y.ttl.max_ttl);
    EXPECT_EQ(x.ttl.negative_max_ttl, y.ttl.negative_max_ttl);
    EXPECT_EQ(x.ttl.servfail_ttl, y.ttl.servfail_ttl);
    EXPECT_EQ(x.local_ttl_s, y.local_ttl_s);
    EXPECT_EQ(x.chaos_version, y.chaos_version);
    EXPECT_EQ(x.chaos_id, y.chaos_id);
    EXPECT_EQ(x.udp_pool.idle_sockets, y.udp_pool.idle_sockets);
    EXPECT_EQ(x.udp_pool.max_uses, y.udp_pool.max_uses);
    EXPECT_EQ(x.stream_idle_timeout_ms, y.stream_idle_timeout_ms);
    EXPECT_EQ(x.tls_auth, y.tls_auth);
    EXPECT_EQ(x.upstream_cookies, y.upstream_cookies);
    EXPECT_EQ(x.shared_cache, y.shared_cache);
    EXPECT_EQ(a.tcp.idle_timeout_ms, b.tcp.idle_timeout_ms);
    EXPECT_EQ(a.tcp.read_timeout_ms, b.tcp.read_timeout_ms);
    EXPECT_EQ(a.tcp.max_connections, b.tcp.max_connections);
    EXPECT_EQ(a.tcp.max_per_client, b.tcp.max_per_client);
    for (const char* address : {"127.0.0.1", "10.1.2.3", "192.0.2.1"}) {
        EXPECT_EQ(allows(a.access, address), allows(b.access, address)) << address;
        EXPECT_EQ(allows(a.snoop, address), allows(b.snoop, address)) << address;
    }
    EXPECT_EQ(a.rate_limiter != nullptr, b.rate_limiter != nullptr);
}

TEST(Snapshot, BuildsEverythingAThreadTakesFromTheConfig) {
    ConfigFiles files;
    files.write_config(kConfig);
    const Config config = files.load();
    upstream::UpstreamRegistry registry;
    const Snapshot s = start_snapshot(config, registry);
    ASSERT_TRUE(s.settings);
    EXPECT_EQ(s.settings->routing->upstream_count(), 3u);  // two default, one forwarded
    EXPECT_EQ(s.settings->routing->rules().size(), 2u);
    EXPECT_EQ(s.settings->resolver.query_timeout_ms, 1500u);
    EXPECT_EQ(s.settings->resolver.ttl.min_ttl, 30u);
    EXPECT_EQ(s.settings->resolver.chaos_version, "test");
    EXPECT_EQ(s.settings->tcp.max_per_client, 7u);
    EXPECT_TRUE(s.settings->rate_limiter);
    ASSERT_EQ(s.hosts.size(), 1u);  // printer.lan, from hosts-file
    ASSERT_TRUE(s.control.metrics_listen.has_value());
    EXPECT_EQ(s.control.metrics_listen->to_string(), "127.0.0.1:9153");
    EXPECT_EQ(s.control.metrics_allow.size(), 1u);
    EXPECT_EQ(s.control.state_dir, config.state_dir);
    EXPECT_EQ(s.control.ttl_policy.min_ttl, 30u);
}

TEST(Snapshot, AnUnchangedRateLimitKeepsItsBuckets) {
    ConfigFiles files;
    files.write_config(kConfig);
    const Config config = files.load();
    upstream::UpstreamRegistry registry;
    const Snapshot first = start_snapshot(config, registry);
    const Snapshot same =
        build_snapshot(config, read_hosts(config), registry, 16, first.settings.get());
    EXPECT_EQ(same.settings->rate_limiter, first.settings->rate_limiter);
    Config faster = config;
    faster.rate_limit = 200;
    const Snapshot changed =
        build_snapshot(faster, read_hosts(faster), registry, 16, first.settings.get());
    EXPECT_NE(changed.settings->rate_limiter, first.settings->rate_limiter);
}

// Start-up and a reload of the same file, through the same builder, give the same settings.
TEST(Snapshot, StartAndReloadGiveTheSameSettings) {
    BlockedSignals blocked;
    ConfigFiles files;
    files.write_config(kConfig);
    const Config config = files.load();
    auto registry = std::make_unique<upstream::UpstreamRegistry>();
    Snapshot start = start_snapshot(config, *registry);
    const server::SettingsPtr at_start = start.settings;
    Supervisor supervisor(files.source, std::move(start), std::move(registry));

    std::string reply;
    const pthread_t main_thread = pthread_self();
    std::thread control([&] {
        reply = supervisor.request_reload();
        pthread_kill(main_thread, SIGTERM);
    });
    EXPECT_EQ(supervisor.run(), SIGTERM);
    control.join();
    EXPECT_EQ(reply, "ok\nreloaded: 3 upstreams, 1 forward rules\n");
    const server::SettingsPtr reloaded = supervisor.current();
    ASSERT_NE(reloaded, at_start);  // a new snapshot, posted as at any reload
    expect_same(*at_start, *reloaded);
    EXPECT_EQ(reloaded->rate_limiter, at_start->rate_limiter);
}

}  // namespace
}  // namespace nscache::daemon
