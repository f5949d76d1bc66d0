// SPDX-License-Identifier: BSD-3-Clause
#include "server/tls_stream.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>

#include <cstring>
#include <string>

#include "server/test_certificate.h"

namespace nscache::server {
namespace {

using Io = TlsStream::Io;

class TlsStreamTest : public ::testing::Test {
  protected:
    void SetUp() override {
        signal(SIGPIPE, SIG_IGN);  // as the daemon does: a write to a gone peer is an error
        ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds_), 0);
        server_ctx_ = certificate_.server_context();
        client_ctx_ = SSL_CTX_new(TLS_client_method());
        client_ = SSL_new(client_ctx_);
        SSL_set_fd(client_, fds_[1]);
        SSL_set_connect_state(client_);
    }
    void TearDown() override {
        SSL_free(client_);
        SSL_CTX_free(client_ctx_);
        SSL_CTX_free(server_ctx_);
        close(fds_[0]);
        close(fds_[1]);
    }
    // Both sides step until the server's handshake is done (or fails): bounded.
    Io handshake(TlsStream& server) {
        Io io = Io::WantRead;
        for (int round = 0; round < 100 && io != Io::Done && io != Io::Failed; ++round) {
            SSL_do_handshake(client_);
            io = server.handshake();
        }
        SSL_do_handshake(client_);  // takes the server's last flight (TLS 1.3 tickets too)
        return io;
    }

    testing::TestCertificate certificate_;
    int fds_[2] = {-1, -1};
    SSL_CTX* server_ctx_ = nullptr;
    SSL_CTX* client_ctx_ = nullptr;
    SSL* client_ = nullptr;
};

TEST_F(TlsStreamTest, HandshakeThenPlaintextBothWays) {
    TlsStream server(fds_[0], server_ctx_);
    ASSERT_TRUE(server.usable());
    EXPECT_FALSE(server.handshake_done());
    ASSERT_EQ(handshake(server), Io::Done);
    EXPECT_TRUE(server.handshake_done());
    EXPECT_FALSE(server.resumed());
    EXPECT_EQ(server.alpn(), "");

    const std::string query = "a query";
    ASSERT_EQ(SSL_write(client_, query.data(), static_cast<int>(query.size())),
              static_cast<int>(query.size()));
    uint8_t buffer[64];
    size_t moved = 0;
    ASSERT_EQ(server.read(buffer, 3, moved), Io::Done);
    EXPECT_EQ(moved, 3u);
    // The rest of the record is decrypted and held: no socket event will say so.
    EXPECT_EQ(server.buffered(), query.size() - 3);
    ASSERT_EQ(server.read(buffer + 3, sizeof buffer - 3, moved), Io::Done);
    EXPECT_EQ(std::string(reinterpret_cast<char*>(buffer), 3 + moved), query);
    EXPECT_EQ(server.read(buffer, sizeof buffer, moved), Io::WantRead);
    EXPECT_EQ(moved, 0u);

    const std::string answer = "an answer";
    ASSERT_EQ(server.write(reinterpret_cast<const uint8_t*>(answer.data()), answer.size(), moved),
              Io::Done);
    EXPECT_EQ(moved, answer.size());
    char got[64];
    ASSERT_EQ(SSL_read(client_, got, sizeof got), static_cast<int>(answer.size()));
    EXPECT_EQ(std::string(got, answer.size()), answer);
}

TEST_F(TlsStreamTest, PeerCloseNotifyIsClosed) {
    TlsStream server(fds_[0], server_ctx_);
    ASSERT_EQ(handshake(server), Io::Done);
    SSL_shutdown(client_);
    uint8_t buffer[16];
    size_t moved = 0;
    EXPECT_EQ(server.read(buffer, sizeof buffer, moved), Io::Closed);
}

TEST_F(TlsStreamTest, PlainEofIsClosedAndGarbageFails) {
    {
        TlsStream server(fds_[0], server_ctx_);
        ASSERT_EQ(handshake(server), Io::Done);
        shutdown(fds_[1], SHUT_WR);
        uint8_t buffer[16];
        size_t moved = 0;
        EXPECT_EQ(server.read(buffer, sizeof buffer, moved), Io::Closed);
    }
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, pair), 0);
    TlsStream server(pair[0], server_ctx_);
    const char not_tls[] = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    ASSERT_GT(write(pair[1], not_tls, sizeof not_tls - 1), 0);
    EXPECT_EQ(server.handshake(), Io::Failed);
    close(pair[0]);
    close(pair[1]);
}

TEST_F(TlsStreamTest, ClientThatLeavesMidHandshakeFails) {
    TlsStream server(fds_[0], server_ctx_);
    EXPECT_EQ(server.handshake(), Io::WantRead);  // nothing sent yet
    SSL_do_handshake(client_);                    // ClientHello...
    shutdown(fds_[1], SHUT_RDWR);                 // ...and gone
    Io io = server.handshake();
    for (int round = 0; round < 10 && io == Io::WantRead; ++round) io = server.handshake();
    EXPECT_EQ(io, Io::Failed);
}

}  // namespace
}  // namespace nscache::server
