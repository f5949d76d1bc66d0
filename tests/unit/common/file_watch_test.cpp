// SPDX-License-Identifier: BSD-3-Clause
#include "common/file_watch.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "fake_clock.h"

namespace nscache {
namespace {

namespace fs = std::filesystem;

class FileWatchTest : public ::testing::Test {
  protected:
    void SetUp() override {
        char tmpl[] = "/tmp/nscache_file_watch_XXXXXX";
        dir_ = mkdtemp(tmpl);
        fs::create_directory(dir_ / "etc");
        fs::create_directory(dir_ / "run");
        write(dir_ / "etc" / "resolv.conf", "nameserver 192.0.2.1\n");
    }
    void TearDown() override { fs::remove_all(dir_); }

    static void write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

    // Turns the loop through `ms` milliseconds of the fake clock, 10 at a time; returns how
    // many times the watch fired. inotify's events are queued by the time the file call
    // returns, so no turn needs to wait for them.
    int run(EventLoop& loop, int ms) {
        const int before = fired_;
        for (int i = 0; i < ms / 10; ++i) {
            clock_.advance_ms(10);
            loop.run_once(0);
        }
        return fired_ - before;
    }

    testing::FakeClock clock_;
    fs::path dir_;
    int fired_ = 0;
};

TEST_F(FileWatchTest, RenameOverTheFileIsSeenOnceAndNothingAfter) {
    EventLoop loop(clock_);
    FileWatch watch(loop, [this] { ++fired_; });
    watch.watch({(dir_ / "etc" / "resolv.conf").string()});
    EXPECT_EQ(run(loop, 200), 0);
    write(dir_ / "etc" / "resolv.conf.new", "nameserver 192.0.2.2\n");
    fs::rename(dir_ / "etc" / "resolv.conf.new", dir_ / "etc" / "resolv.conf");
    EXPECT_EQ(run(loop, 400), 1);
    // A rearm after the change must not set the watch off again (IN_IGNORED).
    EXPECT_EQ(run(loop, 400), 0);
}

TEST_F(FileWatchTest, OtherFilesOfTheFolderAreNotAChange) {
    EventLoop loop(clock_);
    FileWatch watch(loop, [this] { ++fired_; });
    watch.watch({(dir_ / "etc" / "resolv.conf").string()});
    write(dir_ / "etc" / "hostname", "box\n");
    fs::remove(dir_ / "etc" / "hostname");
    EXPECT_EQ(run(loop, 400), 0);
}

TEST_F(FileWatchTest, SymlinkSwapAndTargetEditAreSeen) {
    EventLoop loop(clock_);
    const fs::path link = dir_ / "etc" / "resolv.conf";
    fs::remove(link);
    write(dir_ / "run" / "a.conf", "nameserver 192.0.2.1\n");
    fs::create_symlink(dir_ / "run" / "a.conf", link);
    FileWatch watch(loop, [this] { ++fired_; });
    watch.watch({link.string()});
    // The target is edited where it lives (the link itself does not change).
    write(dir_ / "run" / "a.conf", "nameserver 192.0.2.3\n");
    EXPECT_EQ(run(loop, 400), 1);
    // The link is swapped to a file in the same folder.
    write(dir_ / "run" / "b.conf", "nameserver 192.0.2.4\n");
    fs::create_symlink(dir_ / "run" / "b.conf", dir_ / "etc" / "tmp-link");
    fs::rename(dir_ / "etc" / "tmp-link", link);
    EXPECT_GE(run(loop, 400), 1);
    // Now b.conf is the one that counts.
    write(dir_ / "run" / "b.conf", "nameserver 192.0.2.5\n");
    EXPECT_GE(run(loop, 400), 1);
}

}  // namespace
}  // namespace nscache
