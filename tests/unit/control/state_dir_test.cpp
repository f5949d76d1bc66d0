// SPDX-License-Identifier: BSD-3-Clause
#include "control/state_dir.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

namespace nscache::control {
namespace {

class StateDirTest : public ::testing::Test {
  protected:
    void SetUp() override {
        std::string pattern = ::testing::TempDir() + "nscache_state_XXXXXX";
        ASSERT_NE(mkdtemp(pattern.data()), nullptr);
        base_ = pattern;
        char* real = realpath(base_.c_str(), nullptr);
        base_ = real;
        std::free(real);
        state_ = base_ + "/state";
        ASSERT_EQ(mkdir(state_.c_str(), 0700), 0);
        ASSERT_EQ(mkdir((state_ + "/sub").c_str(), 0700), 0);
        ASSERT_EQ(mkdir((base_ + "/elsewhere").c_str(), 0700), 0);
    }
    void TearDown() override {
        unlink((state_ + "/escape").c_str());
        unlink((base_ + "/state-link").c_str());
        rmdir((state_ + "/sub").c_str());
        rmdir(state_.c_str());
        rmdir((base_ + "/elsewhere").c_str());
        rmdir(base_.c_str());
    }
    std::optional<std::string> resolve(const std::string& dir, const std::string& name) {
        error_.clear();
        return resolve_state_path(dir, name, error_);
    }

    std::string base_;
    std::string state_;
    std::string error_;
};

TEST_F(StateDirTest, RelativeNamesAreTakenInsideTheStateFolder) {
    EXPECT_EQ(resolve(state_, "cache.dump"), state_ + "/cache.dump");
    EXPECT_EQ(resolve(state_, "sub/cache.dump"), state_ + "/sub/cache.dump");
    EXPECT_EQ(resolve(state_, "./sub/../cache.dump"), state_ + "/cache.dump");
}

TEST_F(StateDirTest, AbsolutePathsMustLieInside) {
    EXPECT_EQ(resolve(state_, state_ + "/cache.dump"), state_ + "/cache.dump");
    for (const std::string& outside :
         {base_ + "/cache.dump", base_ + "/elsewhere/x", std::string("/etc/passwd"),
          state_ + "/../cache.dump", state_ + "-other/x"}) {
        EXPECT_FALSE(resolve(state_, outside)) << outside;
    }
    EXPECT_FALSE(resolve(state_, "../cache.dump"));
    EXPECT_NE(error_.find("outside the state folder " + state_), std::string::npos) << error_;
}

TEST_F(StateDirTest, LinksOnTheWayAreResolvedBeforeTheCheck) {
    // A link inside the state folder that leads out of it does not widen it...
    ASSERT_EQ(symlink((base_ + "/elsewhere").c_str(), (state_ + "/escape").c_str()), 0);
    EXPECT_FALSE(resolve(state_, "escape/cache.dump"));
    // ...but the last component is never resolved: dump replaces it, load refuses it.
    EXPECT_EQ(resolve(state_, "escape"), state_ + "/escape");
    // The state folder itself may be reached through a link (the administrator's choice).
    ASSERT_EQ(symlink(state_.c_str(), (base_ + "/state-link").c_str()), 0);
    EXPECT_EQ(resolve(base_ + "/state-link", "a.dump"), state_ + "/a.dump");
    EXPECT_EQ(resolve(base_ + "/state-link", base_ + "/state-link/a.dump"), state_ + "/a.dump");
}

TEST_F(StateDirTest, NamesThatAreNotFilesAndMissingFoldersAreErrors) {
    for (const std::string& bad : {std::string(""), std::string("."), std::string(".."),
                                   std::string("sub/"), state_ + "/"}) {
        EXPECT_FALSE(resolve(state_, bad)) << bad;
    }
    EXPECT_FALSE(resolve(state_, "absent/cache.dump"));
    EXPECT_FALSE(resolve(base_ + "/no-such-state", "cache.dump"));
    EXPECT_NE(error_.find("state-dir " + base_ + "/no-such-state"), std::string::npos) << error_;
}

}  // namespace
}  // namespace nscache::control
