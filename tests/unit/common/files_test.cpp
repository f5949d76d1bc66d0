// SPDX-License-Identifier: BSD-3-Clause
#include "common/files.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <string>

namespace nscache {
namespace {

class ReadSmallFile : public ::testing::Test {
  protected:
    void SetUp() override {
        folder_ = ::testing::TempDir() + "nscache_files_test." + std::to_string(getpid());
        ASSERT_EQ(mkdir(folder_.c_str(), 0700), 0);
    }
    void TearDown() override {
        for (const std::string& p : made_) unlink(p.c_str());
        rmdir(folder_.c_str());
    }
    std::string path(const std::string& name) {
        made_.push_back(folder_ + "/" + name);
        return made_.back();
    }
    std::string folder_;
    std::vector<std::string> made_;
};

TEST_F(ReadSmallFile, ReadsARegularFileAndOneASymlinkNames) {
    const std::string file = path("resolv.conf");
    std::ofstream(file) << "nameserver 192.0.2.1\n";
    const std::string link = path("link");
    ASSERT_EQ(symlink(file.c_str(), link.c_str()), 0);  // as /etc/resolv.conf often is
    std::string error;
    EXPECT_EQ(read_small_file(file, 1024, error), "nameserver 192.0.2.1\n");
    EXPECT_EQ(read_small_file(link, 1024, error), "nameserver 192.0.2.1\n");
}

// A FIFO would block the reader until something writes to it: on the supervisor's thread
// that meant SIGTERM was never read again. Refused without waiting, directly or by a link.
TEST_F(ReadSmallFile, AFifoIsRefusedWithoutBlocking) {
    const std::string fifo = path("fifo");
    ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
    const std::string link = path("link");
    ASSERT_EQ(symlink(fifo.c_str(), link.c_str()), 0);
    for (const std::string& p : {fifo, link}) {
        std::string error;
        EXPECT_FALSE(read_small_file(p, 1024, error)) << p;
        EXPECT_EQ(error, "not a regular file (a FIFO)") << p;
    }
}

TEST_F(ReadSmallFile, ADeviceIsRefused) {
    std::string error;
    EXPECT_FALSE(read_small_file("/dev/zero", 1024, error));  // never ends
    EXPECT_EQ(error, "not a regular file (a character device)");
    EXPECT_FALSE(read_small_file("/", 1024, error));
    EXPECT_EQ(error, "not a regular file (a directory)");
}

TEST_F(ReadSmallFile, AFileOverTheBoundIsRefused) {
    const std::string file = path("big");
    std::ofstream(file) << std::string(1025, 'x');
    std::string error;
    EXPECT_FALSE(read_small_file(file, 1024, error));
    EXPECT_EQ(error, "larger than 1024 bytes");
    EXPECT_EQ(read_small_file(file, 1025, error), std::string(1025, 'x'));
}

TEST_F(ReadSmallFile, AMissingFileSaysSoInErrno) {
    std::string error;
    EXPECT_FALSE(read_small_file(folder_ + "/absent", 1024, error));
    EXPECT_EQ(errno, ENOENT);
    EXPECT_FALSE(error.empty());
}

}  // namespace
}  // namespace nscache
