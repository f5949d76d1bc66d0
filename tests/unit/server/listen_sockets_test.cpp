// SPDX-License-Identifier: BSD-3-Clause
// open_listen_sockets with given sockets (socket activation, a takeover): what `listen` adds
// to them. Loopback sockets on ports the kernel picks; no port below 1024 is ever bound.
#include "server/listen_sockets.h"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace nscache::server {
namespace {

SocketAddress address(const std::string& text) {
    return *parse_socket_address(text, std::nullopt);
}

// A socket as a socket unit makes it: bound to 127.0.0.1 (port: the kernel's, or `port`).
int given_socket(int type, uint16_t& port) {
    const int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    if (type == SOCK_STREAM) {
        EXPECT_EQ(listen(fd, 16), 0);
    }
    socklen_t len = sizeof a;
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
    return fd;
}

bool serves(const std::vector<SocketAddress>& served, const SocketAddress& a) {
    return std::find(served.begin(), served.end(), a) != served.end();
}

// The packaged socket units for 127.0.0.1, and a configuration that names another address:
// both are served (the units must not silently replace `listen`).
TEST(ListenSockets, ExplicitListenAddressesTheGivenSocketsLackAreBoundBeside) {
    uint16_t port = 0;
    InheritedSockets given;
    given.add(InheritedSockets::kDnsUdp, given_socket(SOCK_DGRAM, port));
    given.add(InheritedSockets::kDnsTcp, given_socket(SOCK_STREAM, port));
    Config config;
    config.listen = {address("127.0.0.1:0"), address("127.0.0.2:0")};
    ListenSockets sockets;
    ASSERT_TRUE(open_listen_sockets(config, 2, sockets, &given).ok());
    ASSERT_EQ(sockets.udp_addresses.size(), 2u);
    ASSERT_EQ(sockets.tcp_addresses.size(), 2u);
    EXPECT_TRUE(serves(sockets.udp_addresses, address("127.0.0.1:" + std::to_string(port))));
    EXPECT_EQ(sockets.udp_addresses[1].to_string().rfind("127.0.0.2:", 0), 0u);
    EXPECT_EQ(sockets.udp_addresses[1], sockets.tcp_addresses[1]);  // one port for both
    EXPECT_EQ(sockets.udp[0].size(), 2u);  // each worker: the given one and its own
    EXPECT_EQ(sockets.udp[1].size(), 2u);
    sockets.close_all();
}

// The default `listen` (127.0.0.1:53, [::1]:53) adds nothing to given sockets: they are
// what the units say to serve. (Binding port 53 here would fail: the test is not root.)
TEST(ListenSockets, TheDefaultListenAddsNothingToGivenSockets) {
    uint16_t port = 0;
    InheritedSockets given;
    given.add(InheritedSockets::kDnsUdp, given_socket(SOCK_DGRAM, port));
    Config config;
    config.listen = {address("127.0.0.1:53"), address("[::1]:53")};
    config.listen_is_default = true;
    ListenSockets sockets;
    ASSERT_TRUE(open_listen_sockets(config, 1, sockets, &given).ok());
    EXPECT_EQ(sockets.udp_addresses.size(), 1u);
    EXPECT_TRUE(sockets.tcp_addresses.empty());
    sockets.close_all();
}

// Only a UDP socket given for an address `listen` names: TCP is bound on the same port.
TEST(ListenSockets, AMissingProtocolIsBoundOnTheGivenPort) {
    uint16_t port = 0;
    InheritedSockets given;
    given.add(InheritedSockets::kDnsUdp, given_socket(SOCK_DGRAM, port));
    Config config;
    config.listen = {address("127.0.0.1:0")};
    ListenSockets sockets;
    ASSERT_TRUE(open_listen_sockets(config, 1, sockets, &given).ok());
    const SocketAddress expected = address("127.0.0.1:" + std::to_string(port));
    ASSERT_EQ(sockets.udp_addresses.size(), 1u);
    ASSERT_EQ(sockets.tcp_addresses.size(), 1u);
    EXPECT_EQ(sockets.tcp_addresses[0], expected);
    sockets.close_all();
}

}  // namespace
}  // namespace nscache::server
