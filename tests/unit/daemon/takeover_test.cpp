// SPDX-License-Identifier: BSD-3-Clause
// What the new instance checks of the "cache" memfd it is handed before it loads it.
#include "daemon/takeover.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>

namespace nscache::daemon {
namespace {

int memfd_of(size_t bytes, int seals) {
    const int fd = memfd_create("takeover-test", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    EXPECT_GE(fd, 0);
    const std::string data(bytes, 'x');
    EXPECT_EQ(write(fd, data.data(), data.size()), static_cast<ssize_t>(data.size()));
    if (seals != 0) {
        EXPECT_EQ(fcntl(fd, F_ADD_SEALS, seals), 0);
    }
    return fd;
}

constexpr int kSealed = F_SEAL_WRITE | F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL;

TEST(HandoverCacheMemfd, ASealedMemfdWithinTheCapIsLoaded) {
    const int fd = memfd_of(4096, kSealed);
    EXPECT_TRUE(Handover::check_cache_memfd(fd, 4096));
    close(fd);
}

TEST(HandoverCacheMemfd, AnUnsealedOrPartlySealedOneIsNot) {
    // The sender could rewrite it, or cut it short, while it is read.
    for (int seals : {0, F_SEAL_SHRINK | F_SEAL_GROW, F_SEAL_WRITE | F_SEAL_GROW,
                      F_SEAL_WRITE | F_SEAL_SHRINK}) {
        const int fd = memfd_of(100, seals);
        const Result<void> usable = Handover::check_cache_memfd(fd, 1 << 20);
        EXPECT_FALSE(usable) << "seals " << seals;
        if (!usable) {
            EXPECT_NE(usable.error().find("sealed"), std::string::npos);
        }
        close(fd);
    }
}

TEST(HandoverCacheMemfd, OneLargerThanTheCapIsNot) {
    const int fd = memfd_of(4097, kSealed);
    const Result<void> usable = Handover::check_cache_memfd(fd, 4096);
    ASSERT_FALSE(usable);
    EXPECT_NE(usable.error().find("more than 4096"), std::string::npos) << usable.error();
    close(fd);
}

TEST(HandoverCacheMemfd, AFileThatCannotBeSealedIsNot) {
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    EXPECT_FALSE(Handover::check_cache_memfd(fd, 4096));
    close(fd);
}

}  // namespace
}  // namespace nscache::daemon
