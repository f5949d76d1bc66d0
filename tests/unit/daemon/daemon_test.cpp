// SPDX-License-Identifier: BSD-3-Clause
#include "daemon/daemon.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cache/cache_file.h"
#include "cache/cache_test_support.h"
#include "common/clock.h"
#include "daemon_test_support.h"
#include "front/front_test_support.h"
#include "nscd/protocol.h"

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

// A cache file from another config (or someone else) may hold answers for what this routing
// answers itself: they are left out at start, the rest loads.
TEST_F(DaemonTest, TheCacheFileLoadsWithoutWhatIsLocalNow) {
    const std::vector<std::string> local = {"localhost", "a.localhost", "1.0.0.127.in-addr.arpa",
                                            "version.bind", "printer.lan"};
    const std::vector<std::string> kept = {"kept.example.test", "localhost.example.test"};
    {
        cache::Cache c(cache::CacheConfig{.budget_bytes = 1 << 20});
        for (const auto& names : {local, kept}) {
            for (const std::string& name : names) {
                cache::testing::ClientQuery q(name, dns::rtype::A);
                c.insert(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0},
                         *cache::testing::prepare(cache::testing::positive_answer(name, {300}),
                                                  cache::TtlPolicy{}),
                         monotonic_ms());
            }
        }
        ASSERT_TRUE(cache::dump_cache(c, cache_file(), monotonic_ms(), wall_ms()).ok());
    }
    {
        Daemon d(files_.source, config_);
        ASSERT_TRUE(d.acquire_lock());
        ASSERT_TRUE(d.build_state());
        d.build_settings();
        d.load_cache_file();
        d.save_cache_file();  // what the cache holds now
    }
    cache::Cache after(cache::CacheConfig{.budget_bytes = 1 << 20});
    const auto loaded =
        cache::load_cache(after, cache_file(), cache::TtlPolicy{}, monotonic_ms(), wall_ms());
    ASSERT_TRUE(loaded.ok()) << loaded.error();
    EXPECT_EQ(loaded.value(), kept.size());
    std::array<uint8_t, 4096> out{};
    auto freshness = [&](const std::string& name) {
        cache::testing::ClientQuery q(name, dns::rtype::A);
        return after
            .lookup(cache::CacheKey{q.lower.view(), dns::rtype::A, 1, 0}, q.query(), monotonic_ms(),
                    cache::RenderLimits{}, out, false)
            .freshness;
    };
    for (const std::string& name : local)
        EXPECT_EQ(freshness(name), cache::Freshness::Miss) << name;
    for (const std::string& name : kept)
        EXPECT_EQ(freshness(name), cache::Freshness::Fresh) << name;
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

// The nscd map as glibc's client gets it (GETFDHST from another process: the daemon declines
// its own), mapped read-only; nullptr when none came within a few seconds.
const nscd::MapHead* map_of(const std::string& nscd_socket, size_t& size) {
    const int fd = front::testing::connect_as_child(nscd_socket);
    if (fd < 0) return nullptr;
    const char key[] = "hosts";
    const nscd::RequestHeader header{nscd::kProtocolVersion, nscd::GETFDHST,
                                     static_cast<int32_t>(sizeof key)};
    std::vector<uint8_t> bytes(sizeof header + sizeof key);
    std::memcpy(bytes.data(), &header, sizeof header);
    std::memcpy(bytes.data() + sizeof header, key, sizeof key);
    front::testing::send_all(fd, bytes);
    pollfd p{fd, POLLIN, 0};
    int map_fd = -1;
    uint8_t reply[64];
    if (poll(&p, 1, 5000) == 1) {
        iovec iov{reply, sizeof reply};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        const ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (n >= static_cast<ssize_t>(sizeof key + sizeof(uint64_t)) &&
            CMSG_FIRSTHDR(&msg) != nullptr) {
            std::memcpy(&map_fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof map_fd);
            uint64_t map_size = 0;
            std::memcpy(&map_size, reply + sizeof key, sizeof map_size);
            size = map_size;
        }
    }
    close(fd);
    if (map_fd < 0) return nullptr;
    void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, map_fd, 0);
    close(map_fd);
    return base == MAP_FAILED ? nullptr : static_cast<const nscd::MapHead*>(base);
}

// Review finding 5: the host front's thread serves the NSS and nscd protocols, which are
// destroyed before the front (member order). The destructor stopped it only through
// stop_threads(), and only when there were worker threads: a front running without workers
// (or a start that failed after the front's start) had its protocols freed under its thread,
// and glibc's clients were never told that the map was gone. Now the destructor stops the
// front first, whatever step ran last.
TEST_F(DaemonTest, TheDestructorStopsTheHostFrontBeforeItsProtocols) {
    if (geteuid() != 0) GTEST_SKIP() << "needs root (the nscd socket's client as another process)";
    BlockedSignals blocked;
    Config c = config_;
    c.threads = 0;  // the front's thread alone
    c.nscd_socket = run_dir_ + "/nscd.sock";
    c.nscd_proxy_other_databases = false;
    const nscd::MapHead* head = nullptr;
    size_t size = 0;
    {
        Daemon d(files_.source, c);
        ASSERT_TRUE(d.acquire_lock());
        ASSERT_TRUE(d.build_state());
        d.build_settings();
        ASSERT_TRUE(d.open_fronts());
        ASSERT_TRUE(d.open_control());
        d.start_threads();
        head = map_of(c.nscd_socket, size);
        ASSERT_NE(head, nullptr);
        EXPECT_NE(head->timestamp, 0u);  // a live map
    }                                    // no stop_threads(): a step after start_threads failed
    // The front stopped in order: nscd told its clients the map is gone.
    EXPECT_EQ(head->timestamp, 0u);
    EXPECT_EQ(head->nscd_certainly_running, 0);
    munmap(const_cast<nscd::MapHead*>(head), size);
    for (const std::string& p : {c.nscd_socket, c.nscd_socket + ".lock"}) std::remove(p.c_str());
}

}  // namespace
}  // namespace nscache::daemon
