// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/supervisor.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <memory>
#include <string>
#include <thread>

#include "daemon_test_support.h"
#include "fake_clock.h"

namespace nscache::daemon {
namespace {

using testing::BlockedSignals;
using testing::ConfigFiles;
using testing::start_snapshot;

class SupervisorTest : public ::testing::Test {
  protected:
    // A supervisor as start-up leaves it, over `config` (the lines after the common ones).
    void start(const std::string& config) {
        files_.write_config(config);
        config_ = files_.load();
        auto registry = std::make_unique<upstream::UpstreamRegistry>();
        Snapshot snapshot = start_snapshot(config_, *registry);
        supervisor_ = std::make_unique<Supervisor>(files_.source, std::move(snapshot),
                                                   std::move(registry), clock_);
    }

    // Asks for a reload from another thread (as the control thread does) while this one runs
    // the supervisor; that thread ends the run once it has its answer.
    std::string reload_from_another_thread() {
        std::string reply;
        const pthread_t main_thread = pthread_self();
        std::thread control([&] {
            reply = supervisor_->request_reload();
            pthread_kill(main_thread, SIGTERM);
        });
        EXPECT_EQ(supervisor_->run(), SIGTERM);
        control.join();
        return reply;
    }

    BlockedSignals blocked_;
    nscache::testing::FakeClock clock_;
    ConfigFiles files_;
    Config config_;
    std::unique_ptr<Supervisor> supervisor_;
};

TEST_F(SupervisorTest, AReloadRequestIsAnsweredOnTheSupervisorsLoop) {
    start("upstream = [\"192.0.2.1\"]\n");
    const server::SettingsPtr before = supervisor_->current();
    files_.write_config("upstream = [\"192.0.2.1\", \"192.0.2.2\"]\n");
    EXPECT_EQ(reload_from_another_thread(), "ok\nreloaded: 2 upstreams, 0 forward rules\n");
    EXPECT_NE(supervisor_->current(), before);
    EXPECT_EQ(supervisor_->routing()->upstream_count(), 2u);
    EXPECT_EQ(supervisor_->upstream_groups().size(), 1u);  // the default group "."
}

TEST_F(SupervisorTest, ABadConfigIsRefusedWholeAndTheOldOneStays) {
    start("upstream = [\"192.0.2.1\"]\n");
    const server::SettingsPtr before = supervisor_->current();
    files_.write_config("upstream = [\"192.0.2.1\", \"192.0.2.2\"]\ncache-size = \"1K\"\n");
    const std::string reply = reload_from_another_thread();
    EXPECT_EQ(reply.rfind("error: ", 0), 0u) << reply;
    EXPECT_NE(reply.find("nscache.toml:5"), std::string::npos) << reply;
    EXPECT_EQ(supervisor_->current(), before);
}

TEST_F(SupervisorTest, ReloadsAreRefusedOnceStopping) {
    start("upstream = [\"192.0.2.1\"]\n");
    const server::SettingsPtr before = supervisor_->current();
    pthread_kill(pthread_self(), SIGINT);
    EXPECT_EQ(supervisor_->run(), SIGINT);
    // Answered at once, not after the 30 s a reply may take: nobody runs the loop now.
    EXPECT_EQ(supervisor_->request_reload(), "error: the daemon is shutting down\n");
    EXPECT_EQ(supervisor_->current(), before);
}

TEST_F(SupervisorTest, TheDrainWaitEndsWhenDoneOrAtASecondStopSignal) {
    start("upstream = [\"192.0.2.1\"]\n");
    pthread_kill(pthread_self(), SIGTERM);
    EXPECT_EQ(supervisor_->run(), SIGTERM);
    int asked = 0;
    using WaitEnd = Supervisor::WaitEnd;
    // Done on the third look: the workers drained.
    EXPECT_EQ(supervisor_->wait_until(
                  [&] {
                      supervisor_->wake();  // as a worker thread does when it finishes
                      return ++asked == 3;
                  },
                  monotonic_ms() + 60'000),
              WaitEnd::Done);
    // The deadline passed with no second signal: the log must not blame one.
    EXPECT_EQ(supervisor_->wait_until([] { return false; }, monotonic_ms()), WaitEnd::Deadline);
    // A second SIGTERM while waiting: at once, however long the deadline.
    pthread_kill(pthread_self(), SIGTERM);
    EXPECT_EQ(supervisor_->wait_until([] { return false; }, monotonic_ms() + 60'000),
              WaitEnd::SecondSignal);
}

TEST_F(SupervisorTest, SighupReloadsTheConfigOnTheLoop) {
    start("upstream = [\"192.0.2.1\"]\n");
    files_.write_config("upstream = [\"192.0.2.1\", \"192.0.2.2\", \"192.0.2.3\"]\n");
    pthread_kill(pthread_self(), SIGHUP);
    EXPECT_FALSE(supervisor_->run_once(0));  // SIGHUP does not stop the run
    EXPECT_EQ(supervisor_->routing()->upstream_count(), 3u);
}

TEST_F(SupervisorTest, AnEditedHostsFileIsPublishedOnceTheWatchSettles) {
    start("upstream = [\"192.0.2.1\"]\n");
    const server::SettingsPtr before = supervisor_->current();
    const size_t names = before->routing->local_names().size();
    ConfigFiles::write(files_.hosts_path(), "192.0.2.7 printer.lan\n192.0.2.8 scanner.lan\n");
    supervisor_->run_once(0);  // the inotify event: the watch waits for more to settle
    EXPECT_EQ(supervisor_->current(), before);
    clock_.advance_ms(1000);
    supervisor_->run_once(0);
    const server::SettingsPtr after = supervisor_->current();
    ASSERT_NE(after, before);
    EXPECT_GT(after->routing->local_names().size(), names);
    EXPECT_TRUE(changed_options(before->config, after->config).empty());
}

}  // namespace
}  // namespace nscache::daemon

namespace nscache::daemon {
namespace {

// A takeover's drain: the control thread asks, and run() ends as on SIGTERM.
TEST_F(SupervisorTest, AStopRequestFromAnotherThreadEndsTheRunAsSigtermDoes) {
    start("upstream = [\"192.0.2.1\"]\n");
    EXPECT_FALSE(supervisor_->run_once(0));
    std::thread control([&] { supervisor_->request_stop(); });
    control.join();
    EXPECT_EQ(supervisor_->run(), SIGTERM);
    EXPECT_TRUE(supervisor_->stopped_by_request());
    EXPECT_EQ(supervisor_->request_reload(), "error: the daemon is shutting down\n");
}

TEST_F(SupervisorTest, ASignalIsNotAStopRequest) {
    start("upstream = [\"192.0.2.1\"]\n");
    pthread_kill(pthread_self(), SIGTERM);
    EXPECT_EQ(supervisor_->run(), SIGTERM);
    EXPECT_FALSE(supervisor_->stopped_by_request());
}

}  // namespace
}  // namespace nscache::daemon
