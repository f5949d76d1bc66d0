// SPDX-License-Identifier: BSD-3-Clause
// What the daemon layer's tests share: a config file, resolv.conf and hosts file in a fresh
// temporary folder, the ConfigSource that reads them (as `nscache serve --config` would), and
// the snapshot start-up builds from it; the supervisor's signals blocked for a test.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <memory>
#include <string>

#include "config/config.h"
#include "config/config_source.h"
#include "daemon/snapshot.h"
#include "upstream/upstream_set.h"

namespace nscache::daemon::testing {

class ConfigFiles {
  public:
    ConfigFiles() {
        char tmpl[] = "/tmp/nscache_daemon_test_XXXXXX";
        folder_ = mkdtemp(tmpl);
        source.path = folder_ + "/nscache.toml";
        source.resolv_conf = folder_ + "/resolv.conf";
        write(source.resolv_conf, "nameserver 192.0.2.53\n");
        write(hosts_path(), "192.0.2.7 printer.lan\n");
    }
    ~ConfigFiles() {
        for (const char* name : {"/nscache.toml", "/resolv.conf", "/hosts"}) {
            std::remove((folder_ + name).c_str());
        }
        rmdir(folder_.c_str());
    }
    ConfigFiles(const ConfigFiles&) = delete;
    ConfigFiles& operator=(const ConfigFiles&) = delete;

    std::string hosts_path() const { return folder_ + "/hosts"; }

    // The config file: `extra` lines after the ones every test needs.
    void write_config(const std::string& extra) {
        write(source.path, "listen = [\"" + listen + "\"]\nthreads = 1\nhosts-file = \"" +
                               hosts_path() + "\"\n" + extra);
    }
    static void write(const std::string& path, const std::string& text) {
        std::ofstream(path, std::ios::trunc) << text;
    }

    Config load() const {
        Config config;
        const auto error = source.load(config);
        EXPECT_FALSE(error.has_value()) << error->message;
        return config;
    }

    ConfigSource source;
    std::string listen = "127.0.0.1:0";  // port 0: the kernel picks one when bound

  private:
    std::string folder_;
};

// The signals a Supervisor reads, blocked in this thread for the test (a signalfd only sees
// blocked ones), and whatever is left pending taken before they are unblocked.
class BlockedSignals {
  public:
    BlockedSignals() {
        sigemptyset(&set_);
        for (int s : {SIGTERM, SIGINT, SIGHUP}) sigaddset(&set_, s);
        pthread_sigmask(SIG_BLOCK, &set_, &old_);
    }
    ~BlockedSignals() {
        const timespec zero{};
        while (sigtimedwait(&set_, nullptr, &zero) > 0) {
        }
        pthread_sigmask(SIG_SETMASK, &old_, nullptr);
    }

  private:
    sigset_t set_;
    sigset_t old_;
};

// The snapshot start-up builds (daemon.cpp's build_settings, without the daemon).
inline Snapshot start_snapshot(const Config& config, upstream::UpstreamRegistry& registry) {
    return build_snapshot(config, read_hosts(config), registry,
                          upstream_queries_within_limits(config, /*warn=*/false), nullptr);
}

}  // namespace nscache::daemon::testing
