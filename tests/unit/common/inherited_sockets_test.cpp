// SPDX-License-Identifier: BSD-3-Clause
// The sd_listen_fds(3) variables as InheritedSockets reads them, and the kind of descriptor
// each name must be (real sockets, bound on loopback or a temporary path).
#include "common/inherited_sockets.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <fcntl.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace nscache {
namespace {

constexpr pid_t kSelf = 4242;

int inet_socket(int type, bool bind_it, bool listen_it) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind_it) {
        EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    }
    if (listen_it) {
        EXPECT_EQ(listen(fd, 4), 0);
    }
    return fd;
}

int unix_listener(std::string& path) {
    char dir[] = "/tmp/nscache-inherited-XXXXXX";
    EXPECT_NE(mkdtemp(dir), nullptr);
    path = std::string(dir) + "/s";
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::strcpy(a.sun_path, path.c_str());
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    EXPECT_EQ(listen(fd, 4), 0);
    return fd;
}

TEST(InheritedSockets, UnsetOrAnotherProcessGivesNothing) {
    auto none = InheritedSockets::parse(nullptr, "2", "dns-udp:dns-tcp", kSelf, 1000);
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());
    auto other = InheritedSockets::parse("4243", "2", "dns-udp:dns-tcp", kSelf, 1000);
    ASSERT_TRUE(other);
    EXPECT_TRUE(other->empty());
}

TEST(InheritedSockets, NamesInOrderFromTheFirstDescriptor) {
    auto got = InheritedSockets::parse("4242", "4", "dns-udp:dns-udp:dns-tcp:nscd", kSelf, 1000);
    ASSERT_TRUE(got) << got.error();
    EXPECT_EQ(got->take("dns-udp"), (std::vector<int>{1000, 1001}));
    EXPECT_EQ(got->take_one("nscd"), 1003);
    EXPECT_EQ(got->take("dns-tcp"), (std::vector<int>{1002}));
    EXPECT_TRUE(got->empty());  // nothing left to close (the numbers are not open)
}

TEST(InheritedSockets, MalformedVariablesAreErrors) {
    EXPECT_FALSE(InheritedSockets::parse("x", "1", "dns-udp", kSelf, 1000));
    EXPECT_FALSE(InheritedSockets::parse("4242", nullptr, "dns-udp", kSelf, 1000));
    EXPECT_FALSE(InheritedSockets::parse("4242", "-1", "dns-udp", kSelf, 1000));
    EXPECT_FALSE(InheritedSockets::parse("4242", "1x", "dns-udp", kSelf, 1000));
    auto missing = InheritedSockets::parse("4242", "1", nullptr, kSelf, 1000);
    ASSERT_FALSE(missing);
    EXPECT_NE(missing.error().find("LISTEN_FDNAMES is missing"), std::string::npos);
    auto mismatch = InheritedSockets::parse("4242", "3", "dns-udp:dns-tcp", kSelf, 1000);
    ASSERT_FALSE(mismatch);
    EXPECT_NE(mismatch.error().find("says 3 descriptors but LISTEN_FDNAMES names 2"),
              std::string::npos);
    auto unknown = InheritedSockets::parse("4242", "2", "dns-udp:varlink", kSelf, 1000);
    ASSERT_FALSE(unknown);
    EXPECT_NE(unknown.error().find("unknown name 'varlink'"), std::string::npos);
    auto twice = InheritedSockets::parse("4242", "2", "control:control", kSelf, 1000);
    ASSERT_FALSE(twice);
    EXPECT_NE(twice.error().find("more than one socket named 'control'"), std::string::npos);
}

TEST(InheritedSockets, EachNameMustBeItsKindOfSocket) {
    std::string path;
    struct Case {
        const char* name;
        int fd;
        const char* why;  // null: valid
    } cases[] = {
        {"dns-udp", inet_socket(SOCK_DGRAM, true, false), nullptr},
        {"dns-tcp", inet_socket(SOCK_STREAM, true, true), nullptr},
        {"control", unix_listener(path), nullptr},
        {"dns-udp", inet_socket(SOCK_STREAM, true, true), "is not a datagram socket"},
        {"dns-tcp", inet_socket(SOCK_DGRAM, true, false), "is not a stream socket"},
        {"dns-udp", inet_socket(SOCK_DGRAM, false, false), "is not bound"},
        {"dns-tcp", inet_socket(SOCK_STREAM, true, false), "is not listening"},
        {"nscd", inet_socket(SOCK_STREAM, true, true), "is not a unix socket"},
        {"nss", open("/dev/null", O_RDONLY | O_CLOEXEC), "is not a socket"},
    };
    for (const Case& c : cases) {
        InheritedSockets s;
        s.add(c.name, c.fd);  // closed with `s`
        const Result<void> valid = s.validate();
        if (c.why == nullptr) {
            EXPECT_TRUE(valid) << c.name << ": " << valid.error();
        } else {
            ASSERT_FALSE(valid) << c.name << " should fail: " << c.why;
            EXPECT_NE(valid.error().find(c.why), std::string::npos) << valid.error();
        }
    }
    unlink(path.c_str());
    rmdir(path.substr(0, path.size() - 2).c_str());
}

// A socket of `type` and `protocol` bound on loopback (listening if a stream), or -1 when
// this kernel has no such protocol.
int protocol_socket(int type, int protocol) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, protocol);
    if (fd < 0) return -1;
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        (type == SOCK_STREAM && listen(fd, 4) != 0)) {
        close(fd);
        return -1;
    }
    return fd;
}

TEST(InheritedSockets, ADnsSocketMustBeUdpOrTcpNotAnotherProtocolOfItsType) {
    // UDP-Lite is a datagram socket, MPTCP and SCTP stream ones: right type, wrong protocol.
    const struct {
        const char* name;
        int type;
        int protocol;
        const char* why;
    } cases[] = {
        {"dns-udp", SOCK_DGRAM, IPPROTO_UDPLITE, "is not a UDP socket"},
        {"dns-tcp", SOCK_STREAM, 262 /* IPPROTO_MPTCP */, "is not a TCP socket"},
        {"dns-tcp", SOCK_STREAM, IPPROTO_SCTP, "is not a TCP socket"},
        {"metrics", SOCK_STREAM, 262, "is not a TCP socket"},
    };
    int tried = 0;
    for (const auto& c : cases) {
        const int fd = protocol_socket(c.type, c.protocol);
        if (fd < 0) continue;  // not in this kernel
        ++tried;
        const Result<void> valid = InheritedSockets::validate_one(c.name, fd);
        close(fd);
        ASSERT_FALSE(valid) << c.name << " of protocol " << c.protocol;
        EXPECT_NE(valid.error().find(c.why), std::string::npos) << valid.error();
    }
    if (tried == 0) GTEST_SKIP() << "no UDP-Lite, MPTCP or SCTP in this kernel";
}

TEST(InheritedSockets, HandedMetricsAndHealthSocketsAreCheckedAsDnsTcp) {
    const int udp = inet_socket(SOCK_DGRAM, true, false);
    const int unlistened = inet_socket(SOCK_STREAM, true, false);
    const int good = inet_socket(SOCK_STREAM, true, true);
    std::string path;
    const int local = unix_listener(path);
    EXPECT_FALSE(InheritedSockets::validate_one("metrics", udp));
    EXPECT_FALSE(InheritedSockets::validate_one("health", unlistened));
    EXPECT_FALSE(InheritedSockets::validate_one("health", local));
    EXPECT_TRUE(InheritedSockets::validate_one("metrics", good));
    EXPECT_TRUE(InheritedSockets::validate_one("health", good));
    for (int fd : {udp, unlistened, good, local}) close(fd);
    unlink(path.c_str());
    rmdir(path.substr(0, path.size() - 2).c_str());
}

TEST(InheritedSockets, FromEnvironmentUnsetsTheVariables) {
    setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
    setenv("LISTEN_FDS", "0", 1);
    setenv("LISTEN_FDNAMES", "", 1);
    auto got = InheritedSockets::from_environment();
    ASSERT_TRUE(got) << got.error();
    EXPECT_TRUE(got->empty());
    EXPECT_EQ(std::getenv("LISTEN_PID"), nullptr);
    EXPECT_EQ(std::getenv("LISTEN_FDS"), nullptr);
    EXPECT_EQ(std::getenv("LISTEN_FDNAMES"), nullptr);
}

}  // namespace
}  // namespace nscache
