// SPDX-License-Identifier: BSD-3-Clause
#include "common/runtime_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

namespace nscache {
namespace {

class RuntimeLockTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = ::testing::TempDir() + "nscache_lock_XXXXXX";
        ASSERT_NE(mkdtemp(pattern.data()), nullptr);
        folder_ = pattern;
        path_ = folder_ + "/control.sock";
    }
    void TearDown() override {
        unlink((path_ + ".lock").c_str());
        unlink((folder_ + "/other.lock").c_str());
        rmdir(folder_.c_str());
    }
    // Whether another open file of the lock could take it now (as a second instance would).
    bool lock_is_free() {
        const int fd = open((path_ + ".lock").c_str(), O_RDONLY | O_CLOEXEC);
        const bool free = fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0;
        if (fd >= 0) close(fd);
        return free;
    }
    std::string folder_;
    std::string path_;
};

TEST_F(RuntimeLockTest, ASecondHolderIsRefused) {
    RuntimeLock first;
    ASSERT_TRUE(first.acquire({path_}).ok());
    RuntimeLock second;
    const Result<void> refused = second.acquire({path_});
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().find("another nscache (pid " + std::to_string(getpid())),
              std::string::npos);
}

// A takeover: the lock file's descriptor is the lock; it passes without a moment unheld.
TEST_F(RuntimeLockTest, AnInheritedLockFileKeepsTheLockWhenTheFirstHolderLetsGo) {
    auto first = std::make_unique<RuntimeLock>();
    ASSERT_TRUE(first->acquire({path_}).ok());
    ASSERT_EQ(first->held().size(), 1u);
    std::map<std::string, int> handed{
        {path_ + ".lock", fcntl(first->held()[0].second, F_DUPFD_CLOEXEC, 0)}};
    RuntimeLock second;
    ASSERT_TRUE(second.acquire({path_}, &handed).ok());
    EXPECT_TRUE(handed.empty());  // taken
    first.reset();
    EXPECT_FALSE(lock_is_free());
}

TEST_F(RuntimeLockTest, AnInheritedDescriptorOfAnotherFileIsNotTheLock) {
    RuntimeLock first;
    ASSERT_TRUE(first.acquire({path_}).ok());
    const int other = open((folder_ + "/other.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    std::map<std::string, int> handed{{path_ + ".lock", other}};
    RuntimeLock second;
    EXPECT_FALSE(second.acquire({path_}, &handed).ok());  // held by `first`: refused as usual
    EXPECT_EQ(handed.size(), 1u);                         // left to the caller
    close(other);
}

}  // namespace
}  // namespace nscache
