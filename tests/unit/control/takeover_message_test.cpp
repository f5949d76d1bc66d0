// SPDX-License-Identifier: BSD-3-Clause
#include "control/takeover_message.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

namespace nscache::control {
namespace {

struct SocketPair {
    int a = -1;
    int b = -1;
    SocketPair() {
        int fds[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0) {
            a = fds[0];
            b = fds[1];
            timeval tv{2, 0};  // a failing test cannot hang
            setsockopt(b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        }
    }
    ~SocketPair() {
        if (a >= 0) close(a);
        if (b >= 0) close(b);
    }
};

// The number of descriptors this process has open (to see none leaks).
size_t open_descriptors() {
    size_t n = 0;
    for (int fd = 0; fd < 1024; ++fd) n += fcntl(fd, F_GETFD) >= 0 ? 1 : 0;
    return n;
}

bool same_file(int x, int y) {
    struct stat sx {};
    struct stat sy {};
    return fstat(x, &sx) == 0 && fstat(y, &sy) == 0 && sx.st_dev == sy.st_dev &&
           sx.st_ino == sy.st_ino;
}

// Raw bytes (and optionally descriptors) as a hostile peer would send them.
void send_raw(int fd, const std::vector<uint8_t>& bytes, const std::vector<int>& fds = {}) {
    std::vector<char> control(CMSG_SPACE(sizeof(int) * (fds.empty() ? 1 : fds.size())));
    iovec iov{const_cast<uint8_t*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = control.data();
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    ASSERT_EQ(sendmsg(fd, &msg, MSG_NOSIGNAL), static_cast<ssize_t>(bytes.size()));
}

std::vector<uint8_t> message(std::vector<uint8_t> body) {
    std::vector<uint8_t> out(kTakeoverMagic, kTakeoverMagic + sizeof kTakeoverMagic);
    const auto n = static_cast<uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(n >> (8 * i)));
    out.insert(out.end(), body.begin(), body.end());
    return out;
}

TEST(TakeoverMessage, NamesRoundTrip) {
    const std::vector<std::string> names{"dns-udp", "dns-udp", "control", "lock:/run/x.sock.lock",
                                         "cache"};
    Result<std::vector<uint8_t>> bytes = encode_takeover_names(names);
    ASSERT_TRUE(bytes.ok());
    Result<size_t> length = takeover_body_length(std::span(bytes->data(), kTakeoverHeader));
    ASSERT_TRUE(length.ok());
    ASSERT_EQ(*length + kTakeoverHeader, bytes->size());
    Result<std::vector<std::string>> decoded =
        decode_takeover_body(std::span(bytes->data() + kTakeoverHeader, *length), names.size());
    ASSERT_TRUE(decoded.ok()) << decoded.error();
    EXPECT_EQ(*decoded, names);
}

TEST(TakeoverMessage, EncodeRefusesWhatDecodeWouldRefuse) {
    EXPECT_FALSE(encode_takeover_names({""}).ok());
    EXPECT_FALSE(encode_takeover_names({std::string(kMaxTakeoverName + 1, 'a')}).ok());
    EXPECT_FALSE(encode_takeover_names({"new\nline"}).ok());
    EXPECT_FALSE(encode_takeover_names(std::vector<std::string>(kMaxTakeoverFds + 1, "x")).ok());
    EXPECT_TRUE(encode_takeover_names(std::vector<std::string>(kMaxTakeoverFds, "x")).ok());
    EXPECT_TRUE(encode_takeover_names({std::string(kMaxTakeoverName, 'a')}).ok());
}

TEST(TakeoverMessage, HeaderChecksMagicAndLength) {
    std::vector<uint8_t> m = message({0, 0});
    EXPECT_TRUE(takeover_body_length(m).ok());
    EXPECT_FALSE(takeover_body_length(std::span(m.data(), kTakeoverHeader - 1)).ok());
    m[0] = 'X';
    EXPECT_FALSE(takeover_body_length(m).ok());
    EXPECT_FALSE(takeover_body_length(message({0})).ok());  // shorter than the count
    std::vector<uint8_t> huge = message({0, 0});
    huge[sizeof kTakeoverMagic + 3] = 0x7f;  // ~2 GB claimed
    EXPECT_FALSE(takeover_body_length(huge).ok());
}

TEST(TakeoverMessage, DecodeRefusesMalformedBodies) {
    // Count and descriptors disagree.
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 1, 'a'}, 0).ok());
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 1, 'a'}, 2).ok());
    // A name running past the end, an empty name, a forbidden byte.
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 5, 'a'}, 1).ok());
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 0}, 1).ok());
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 1, 0}, 1).ok());
    // Bytes after the last name; a count above the bound.
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{1, 0, 1, 'a', 'b'}, 1).ok());
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{0xff, 0xff}, 0xffff).ok());
    // The count promises more names than there are bytes.
    EXPECT_FALSE(decode_takeover_body(std::vector<uint8_t>{2, 0, 1, 'a'}, 2).ok());
    EXPECT_TRUE(decode_takeover_body(std::vector<uint8_t>{1, 0, 1, 'a'}, 1).ok());
}

TEST(TakeoverMessage, DescriptorsTravelWithTheirNames) {
    SocketPair pair;
    int pipe_fds[2];
    ASSERT_EQ(pipe2(pipe_fds, O_CLOEXEC), 0);
    ASSERT_TRUE(send_takeover(pair.a, {{"nss", pipe_fds[0]}, {"cache", pipe_fds[1]}}).ok());
    Result<std::vector<NamedFd>> got = receive_takeover(pair.b);
    ASSERT_TRUE(got.ok()) << got.error();
    ASSERT_EQ(got->size(), 2u);
    EXPECT_EQ((*got)[0].name, "nss");
    EXPECT_EQ((*got)[1].name, "cache");
    EXPECT_TRUE(same_file((*got)[0].fd, pipe_fds[0]));
    EXPECT_TRUE(same_file((*got)[1].fd, pipe_fds[1]));
    EXPECT_NE((*got)[0].fd, pipe_fds[0]);  // a new descriptor of the same file
    EXPECT_TRUE(fcntl((*got)[0].fd, F_GETFD) & FD_CLOEXEC);
    close_all(*got);
    EXPECT_TRUE(got->empty());
    close(pipe_fds[0]);
    close(pipe_fds[1]);
}

TEST(TakeoverMessage, ARefusalLineIsTheError) {
    SocketPair pair;
    const std::string line = "error: permission denied\n";
    ASSERT_EQ(send(pair.a, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    Result<std::vector<NamedFd>> got = receive_takeover(pair.b);
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.error(), "permission denied");
}

TEST(TakeoverMessage, AHostilePeersDescriptorsAreClosedOnEveryError) {
    const size_t before = open_descriptors();
    const int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    ASSERT_GE(devnull, 0);
    const std::vector<std::vector<uint8_t>> bad{
        message({2, 0, 1, 'a'}),         // two named, one name given
        message({1, 0, 1, 'a', 'x'}),    // bytes after the names
        message({1, 0, 1, '\n'}),        // a forbidden name
        {'e', 'r', 'r', 'o', 'r', ':'},  // text with descriptors
    };
    for (const auto& bytes : bad) {
        SocketPair pair;
        send_raw(pair.a, bytes, {devnull, devnull});
        EXPECT_FALSE(receive_takeover(pair.b).ok());
    }
    {
        // Two named, one sent.
        SocketPair pair;
        send_raw(pair.a, message({2, 0, 1, 'a', 1, 'b'}), {devnull});
        EXPECT_FALSE(receive_takeover(pair.b).ok());
    }
    {
        // A message cut short: the peer closes halfway.
        SocketPair pair;
        std::vector<uint8_t> m = message({1, 0, 4, 'a', 'b', 'c', 'd'});
        m.resize(m.size() - 2);
        send_raw(pair.a, m, {devnull});
        shutdown(pair.a, SHUT_WR);
        EXPECT_FALSE(receive_takeover(pair.b).ok());
    }
    {
        // More descriptors than the receiver makes room for: the kernel truncates (and
        // closes the surplus); the rest must be closed too.
        SocketPair pair;
        std::vector<int> many(kMaxTakeoverFds + 20, devnull);
        std::vector<uint8_t> body{static_cast<uint8_t>(many.size()),
                                  static_cast<uint8_t>(many.size() >> 8)};
        for (size_t i = 0; i < many.size(); ++i) body.insert(body.end(), {1, 'a'});
        send_raw(pair.a, message(body), many);
        EXPECT_FALSE(receive_takeover(pair.b).ok());
    }
    close(devnull);
    EXPECT_EQ(open_descriptors(), before);
}

TEST(TakeoverMessage, APeerThatSaysNothingTimesOut) {
    SocketPair pair;
    timeval tv{0, 50'000};
    setsockopt(pair.b, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    Result<std::vector<NamedFd>> got = receive_takeover(pair.b);
    ASSERT_FALSE(got.ok());
    EXPECT_NE(got.error().find("in time"), std::string::npos) << got.error();
}

}  // namespace
}  // namespace nscache::control
