// SPDX-License-Identifier: BSD-3-Clause
#include "server/tls_server.h"

#include <gtest/gtest.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <string>

#include "server/test_certificate.h"
#include "server/tls_stream.h"

namespace nscache::server {
namespace {

class TlsServerTest : public ::testing::Test {
  protected:
    void SetUp() override {
        signal(SIGPIPE, SIG_IGN);
        char pattern[] = "/tmp/nscache-tls-XXXXXX";
        ASSERT_NE(mkdtemp(pattern), nullptr);
        dir_ = pattern;
        cert_ = dir_ + "/cert.pem";
        key_ = dir_ + "/key.pem";
        ASSERT_TRUE(certificate_.write_pem(cert_, key_));
        chmod(key_.c_str(), 0600);
    }
    void TearDown() override {
        unlink(cert_.c_str());
        unlink(key_.c_str());
        rmdir(dir_.c_str());
    }

    // A client handshake against `context`, offering `alpn` (wire form); returns the server
    // side's ALPN, "" for none, and whether it resumed `session` (null: a fresh one, kept in
    // `session` for the next call).
    std::string handshake(const TlsServerContext& context, const std::string& alpn,
                          SSL_SESSION** session, bool* resumed) {
        int fds[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, fds), 0);
        SSL_CTX* client_ctx = SSL_CTX_new(TLS_client_method());
        SSL* client = SSL_new(client_ctx);
        SSL_set_fd(client, fds[1]);
        SSL_set_connect_state(client);
        if (!alpn.empty()) {
            SSL_set_alpn_protos(client, reinterpret_cast<const unsigned char*>(alpn.data()),
                                static_cast<unsigned>(alpn.size()));
        }
        if (session != nullptr && *session != nullptr) SSL_set_session(client, *session);
        std::string chosen;
        {
            TlsStream server(fds[0], context.ctx());
            TlsStream::Io io = TlsStream::Io::WantRead;
            for (int round = 0;
                 round < 100 && io != TlsStream::Io::Done && io != TlsStream::Io::Failed; ++round) {
                SSL_do_handshake(client);
                io = server.handshake();
            }
            EXPECT_EQ(io, TlsStream::Io::Done);
            // TLS 1.3 tickets come after the handshake: let the client read them.
            uint8_t byte = 0;
            size_t moved = 0;
            server.write(&byte, 1, moved);
            char got[8];
            SSL_read(client, got, sizeof got);
            chosen = std::string(server.alpn());
            if (resumed != nullptr) *resumed = server.resumed();
        }
        if (session != nullptr) {
            if (*session != nullptr) SSL_SESSION_free(*session);
            *session = SSL_get1_session(client);
        }
        SSL_shutdown(client);  // freed without it, OpenSSL marks the session not resumable
        SSL_free(client);
        SSL_CTX_free(client_ctx);
        close(fds[0]);
        close(fds[1]);
        return chosen;
    }

    testing::TestCertificate certificate_;
    std::string dir_, cert_, key_;
};

TEST_F(TlsServerTest, RefusesMissingAndMismatchedFiles) {
    std::string error, warning;
    EXPECT_EQ(
        TlsServerContext::create(cert_, dir_ + "/none.pem", TlsListenerKind::Dot, error, warning),
        nullptr);
    EXPECT_NE(error.find("none.pem"), std::string::npos) << error;
    error.clear();
    EXPECT_EQ(TlsServerContext::create("", key_, TlsListenerKind::Dot, error, warning), nullptr);
    EXPECT_NE(error.find("tls-certificate"), std::string::npos) << error;

    testing::TestCertificate other("other.test");
    const std::string other_cert = dir_ + "/other.pem", other_key = dir_ + "/other-key.pem";
    ASSERT_TRUE(other.write_pem(other_cert, other_key));
    error.clear();
    EXPECT_EQ(TlsServerContext::create(other_cert, key_, TlsListenerKind::Dot, error, warning),
              nullptr);
    EXPECT_NE(error.find("does not match"), std::string::npos) << error;  // and says so
    unlink(other_cert.c_str());
    unlink(other_key.c_str());
    EXPECT_TRUE(warning.empty());
}

TEST_F(TlsServerTest, WarnsOfAKeyEveryoneCanRead) {
    chmod(key_.c_str(), 0644);
    std::string error, warning;
    EXPECT_NE(TlsServerContext::create(cert_, key_, TlsListenerKind::Dot, error, warning), nullptr);
    EXPECT_NE(warning.find("readable by every user"), std::string::npos) << warning;
}

TEST_F(TlsServerTest, AlpnPerKind) {
    std::string error, warning;
    auto dot = TlsServerContext::create(cert_, key_, TlsListenerKind::Dot, error, warning);
    auto doh = TlsServerContext::create(cert_, key_, TlsListenerKind::Doh, error, warning);
    ASSERT_TRUE(dot && doh) << error;
    EXPECT_EQ(handshake(*dot,
                        std::string("\x03"
                                    "dot",
                                    4),
                        nullptr, nullptr),
              "dot");
    EXPECT_EQ(handshake(*dot, "", nullptr, nullptr), "");  // a DoT client need not offer it
    EXPECT_EQ(handshake(*doh, std::string("\x08http/1.1\x02h2", 12), nullptr, nullptr), "h2");
    EXPECT_EQ(handshake(*doh, std::string("\x08http/1.1", 9), nullptr, nullptr), "http/1.1");
}

TEST_F(TlsServerTest, TicketsResumeAcrossContextsOfOneProcess) {
    std::string error, warning;
    auto first = TlsServerContext::create(cert_, key_, TlsListenerKind::Dot, error, warning);
    ASSERT_TRUE(first) << error;
    SSL_SESSION* session = nullptr;
    bool resumed = true;
    handshake(*first, "", &session, &resumed);
    EXPECT_FALSE(resumed);
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(SSL_SESSION_has_ticket(session), 1);
    handshake(*first, "", &session, &resumed);
    EXPECT_TRUE(resumed);
    // A reload builds a new context: the tickets handed out before it still resume.
    auto reloaded = TlsServerContext::create(cert_, key_, TlsListenerKind::Dot, error, warning);
    ASSERT_TRUE(reloaded) << error;
    handshake(*reloaded, "", &session, &resumed);
    EXPECT_TRUE(resumed);
    SSL_SESSION_free(session);
}

TEST_F(TlsServerTest, LoadForAConfigNeedsBothFiles) {
    Config config;
    TlsContexts contexts;
    std::string error;
    std::vector<std::string> warnings;
    EXPECT_TRUE(load_tls_contexts(config, contexts, error, warnings));  // no listener
    EXPECT_FALSE(contexts.dot || contexts.doh);
    config.listen_https.push_back(*parse_socket_address("127.0.0.1:8443", std::nullopt));
    EXPECT_FALSE(load_tls_contexts(config, contexts, error, warnings));
    EXPECT_NE(error.find("tls-private-key"), std::string::npos) << error;
    config.tls_certificate = cert_;
    config.tls_private_key = key_;
    EXPECT_TRUE(load_tls_contexts(config, contexts, error, warnings)) << error;
    EXPECT_FALSE(contexts.dot);
    ASSERT_TRUE(contexts.doh);
    EXPECT_EQ(contexts.doh->kind(), TlsListenerKind::Doh);
}

}  // namespace
}  // namespace nscache::server
