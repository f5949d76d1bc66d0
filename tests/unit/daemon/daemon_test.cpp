// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/daemon.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "daemon_test_support.h"

namespace nscache::daemon {
namespace {

using testing::BlockedSignals;
using testing::ConfigFiles;

class DaemonTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/nscache_daemon_run_XXXXXX";
        run_dir_ = mkdtemp(tmpl);
        const std::string extra = "upstream = [\"192.0.2.1\"]\nnss = false\n";
        files_.write_config(extra + "control = \"" + control() + "\"\nstate-dir = \"" + run_dir_ +
                            "\"\ncache-file = \"" + cache_file() + "\"\n");
        config_ = files_.load();
    }
    void TearDown() override {
        for (const std::string& p : {control(), control() + ".lock", cache_file(),
                                     cache_file() + ".lock", cache_file() + ".tmp"}) {
            std::remove(p.c_str());
        }
        rmdir(run_dir_.c_str());
    }
    std::string control() const { return run_dir_ + "/control.sock"; }
    std::string cache_file() const { return run_dir_ + "/cache.bin"; }

    ConfigFiles files_;
    std::string run_dir_;
    Config config_;
};

TEST_F(DaemonTest, ASecondInstanceWithTheSamePathsStopsAtTheLock) {
    Daemon first(files_.source, config_);
    ASSERT_TRUE(first.acquire_lock());
    Daemon second(files_.source, config_);
    const Result<void> locked = second.acquire_lock();
    ASSERT_FALSE(locked);
    EXPECT_NE(locked.error().find(control()), std::string::npos) << locked.error();
}

// Every step in run_daemon's order, a stop signal, and the cache file written at the end.
TEST_F(DaemonTest, RunsEveryStepAndStopsOnSigterm) {
    BlockedSignals blocked;  // before any thread starts: the workers inherit the mask
    {
        Daemon d(files_.source, config_);
        ASSERT_TRUE(d.acquire_lock());
        ASSERT_TRUE(d.build_state());
        d.build_settings();
        ASSERT_TRUE(d.open_sockets());
        ASSERT_TRUE(d.find_user());
        ASSERT_TRUE(d.open_fronts());
        ASSERT_TRUE(d.open_control());
        d.load_cache_file();
        ASSERT_TRUE(d.drop_privileges());  // no `user`: nothing to drop
        d.start_threads();
        d.announce_ready();
        struct stat st {};
        EXPECT_EQ(stat(control().c_str(), &st), 0);
        EXPECT_TRUE(S_ISSOCK(st.st_mode));
        pthread_kill(pthread_self(), SIGTERM);
        d.run();
        d.stop_threads();
        d.save_cache_file();
    }
    struct stat st {};
    EXPECT_EQ(stat(cache_file().c_str(), &st), 0) << "cache-file written at stop";
    EXPECT_NE(stat(control().c_str(), &st), 0) << "control socket removed with the Daemon";
}

// A step that fails leaves the destructor to release what the earlier ones built.
TEST_F(DaemonTest, AFailedStepReleasesWhatWasBuilt) {
    Config taken = config_;
    taken.user = "no-such-user-nscache-test";
    {
        Daemon d(files_.source, taken);
        ASSERT_TRUE(d.acquire_lock());
        ASSERT_TRUE(d.build_state());
        d.build_settings();
        ASSERT_TRUE(d.open_sockets());
        const Result<void> user = d.find_user();
        ASSERT_FALSE(user);
        EXPECT_EQ(user.error(), "user 'no-such-user-nscache-test' does not exist");
    }
    // The lock went with it: a new instance starts.
    Daemon again(files_.source, config_);
    EXPECT_TRUE(again.acquire_lock());
}

}  // namespace
}  // namespace nscache::daemon
