// SPDX-License-Identifier: BSD-3-Clause
// HttpsConnection against a real HTTP/2 client (nghttp2's client session over an OpenSSL
// client) on a socketpair, the loop on a fake clock: answers and their headers, the error
// statuses, misses answered later, the HTTP/1.1 refusal, and the abuse bounds.
#include "server/https_connection.h"

#include <gtest/gtest.h>
#include <nghttp2/nghttp2.h>
#include <openssl/ssl.h>

#include <csignal>
#include <map>
#include <string>

#include "common/base64url.h"
#include "server/server_test_support.h"
#include "server/test_certificate.h"

namespace nscache::server {
namespace {

using testing::ServerHarness;
using testing::WireBuilder;

std::vector<uint8_t> query(std::string_view name, uint16_t id) {
    WireBuilder b;
    b.header(id, dns::flag::RD, 1).question(name, dns::rtype::A);
    return b.bytes;
}

int alpn_h2(SSL*, const unsigned char** out, unsigned char* outlen, const unsigned char* in,
            unsigned int inlen, void*) {
    static const unsigned char kH2[] = {2, 'h', '2'};
    unsigned char* selected = nullptr;
    if (SSL_select_next_proto(&selected, outlen, kH2, sizeof kH2, in, inlen) !=
        OPENSSL_NPN_NEGOTIATED) {
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = selected;
    return SSL_TLSEXT_ERR_OK;
}

struct Response {
    int status = 0;
    std::map<std::string, std::string> headers;
    std::vector<uint8_t> body;
    bool closed = false;
    uint32_t error = 0;  // the stream's close code (RST_STREAM)
};

// The client side: OpenSSL over its end of the socketpair, nghttp2's client session above.
class H2Client {
  public:
    H2Client(int fd, bool offer_h2) : fd_(fd) {
        ctx_ = SSL_CTX_new(TLS_client_method());
        if (offer_h2) SSL_CTX_set_alpn_protos(ctx_, reinterpret_cast<const uint8_t*>("\2h2"), 3);
        ssl_ = SSL_new(ctx_);
        SSL_set_fd(ssl_, fd);
        SSL_set_connect_state(ssl_);
        nghttp2_session_callbacks* cb;
        nghttp2_session_callbacks_new(&cb);
        nghttp2_session_callbacks_set_on_header_callback(cb, on_header);
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cb, on_data);
        nghttp2_session_callbacks_set_on_stream_close_callback(cb, on_close);
        nghttp2_session_callbacks_set_on_frame_recv_callback(cb, on_frame);
        nghttp2_session_client_new(&session_, cb, this);
        nghttp2_session_callbacks_del(cb);
        nghttp2_submit_settings(session_, NGHTTP2_FLAG_NONE, nullptr, 0);
    }
    ~H2Client() {
        nghttp2_session_del(session_);
        SSL_free(ssl_);
        SSL_CTX_free(ctx_);
        close(fd_);
    }

    int32_t post(const std::vector<uint8_t>& body, std::string_view path = "/dns-query",
                 std::string_view type = "application/dns-message", bool send_body = true) {
        const std::string length = std::to_string(body.size());
        std::vector<nghttp2_nv> nv = {nv_of(":method", "POST"), nv_of(":scheme", "https"),
                                      nv_of(":authority", "dns.test"), nv_of(":path", path),
                                      nv_of("content-type", type)};
        nghttp2_data_provider provider{};
        provider.read_callback = send_body ? read_body : never_send;
        const int32_t id =
            nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), &provider, this);
        bodies_[id] = body;
        return id;
    }
    int32_t request(std::string_view method, std::string_view path) {
        std::vector<nghttp2_nv> nv = {nv_of(":method", method), nv_of(":scheme", "https"),
                                      nv_of(":authority", "dns.test"), nv_of(":path", path)};
        return nghttp2_submit_request(session_, nullptr, nv.data(), nv.size(), nullptr, this);
    }

    // Moves bytes both ways, as far as they go now.
    void pump() {
        if (!SSL_is_init_finished(ssl_)) {
            SSL_do_handshake(ssl_);
            if (!SSL_is_init_finished(ssl_)) return;
        }
        if (raw_mode_) {
            flush_raw();
        } else {
            const uint8_t* data;
            ssize_t n;
            while ((n = nghttp2_session_mem_send(session_, &data)) > 0) {
                pending_.insert(pending_.end(), data, data + n);
            }
            flush_raw();
        }
        uint8_t buffer[16384];
        for (;;) {
            const int n = SSL_read(ssl_, buffer, sizeof buffer);
            if (n > 0) {
                if (raw_mode_) {
                    raw_in_.insert(raw_in_.end(), buffer, buffer + n);
                } else {
                    nghttp2_session_mem_recv(session_, buffer, static_cast<size_t>(n));
                }
                continue;
            }
            const int error = SSL_get_error(ssl_, n);
            if (error != SSL_ERROR_WANT_READ && error != SSL_ERROR_WANT_WRITE) eof = true;
            break;
        }
    }
    // Bytes written as they are, without the HTTP/2 session (an HTTP/1.1 client).
    void send_raw(std::string_view bytes) {
        raw_mode_ = true;
        pending_.insert(pending_.end(), bytes.begin(), bytes.end());
    }
    nghttp2_session* session() { return session_; }

    std::map<int32_t, Response> responses;
    bool goaway = false;
    uint32_t goaway_code = 0;
    bool eof = false;
    std::string raw_in_;

  private:
    static nghttp2_nv nv_of(std::string_view name, std::string_view value) {
        return {reinterpret_cast<uint8_t*>(const_cast<char*>(name.data())),
                reinterpret_cast<uint8_t*>(const_cast<char*>(value.data())), name.size(),
                value.size(), NGHTTP2_NV_FLAG_NONE};
    }
    static H2Client& of(void* p) { return *static_cast<H2Client*>(p); }
    static ssize_t read_body(nghttp2_session*, int32_t id, uint8_t* buf, size_t length,
                             uint32_t* flags, nghttp2_data_source*, void* user) {
        auto& body = of(user).bodies_[id];
        const size_t n = std::min(length, body.size());
        std::memcpy(buf, body.data(), n);
        body.erase(body.begin(), body.begin() + static_cast<ptrdiff_t>(n));
        if (body.empty()) *flags |= NGHTTP2_DATA_FLAG_EOF;
        return static_cast<ssize_t>(n);
    }
    static ssize_t never_send(nghttp2_session*, int32_t, uint8_t*, size_t, uint32_t*,
                              nghttp2_data_source*, void*) {
        return NGHTTP2_ERR_DEFERRED;
    }
    static int on_header(nghttp2_session*, const nghttp2_frame* frame, const uint8_t* name,
                         size_t namelen, const uint8_t* value, size_t valuelen, uint8_t,
                         void* user) {
        Response& r = of(user).responses[frame->hd.stream_id];
        const std::string n(reinterpret_cast<const char*>(name), namelen);
        const std::string v(reinterpret_cast<const char*>(value), valuelen);
        if (n == ":status") r.status = std::stoi(v);
        r.headers[n] = v;
        return 0;
    }
    static int on_data(nghttp2_session*, uint8_t, int32_t id, const uint8_t* data, size_t len,
                       void* user) {
        auto& body = of(user).responses[id].body;
        body.insert(body.end(), data, data + len);
        return 0;
    }
    static int on_close(nghttp2_session*, int32_t id, uint32_t error, void* user) {
        Response& r = of(user).responses[id];
        r.closed = true;
        r.error = error;
        return 0;
    }
    static int on_frame(nghttp2_session*, const nghttp2_frame* frame, void* user) {
        if (frame->hd.type == NGHTTP2_GOAWAY) {
            of(user).goaway = true;
            of(user).goaway_code = frame->goaway.error_code;
        }
        return 0;
    }
    void flush_raw() {
        while (!pending_.empty()) {
            const int n = SSL_write(ssl_, pending_.data(), static_cast<int>(pending_.size()));
            if (n <= 0) break;
            pending_.erase(pending_.begin(), pending_.begin() + n);
        }
    }

    int fd_;
    SSL_CTX* ctx_;
    SSL* ssl_;
    nghttp2_session* session_ = nullptr;
    bool raw_mode_ = false;
    std::vector<uint8_t> pending_;
    std::map<int32_t, std::vector<uint8_t>> bodies_;
};

class HttpsConnectionTest : public ::testing::Test {
  protected:
    HttpsConnectionTest() : https_(h_.loop, h_.pipeline, h_.shared.tcp, h_.counters) {
        signal(SIGPIPE, SIG_IGN);
        ctx_ = certificate_.server_context();
        SSL_CTX_set_alpn_select_cb(ctx_, alpn_h2, nullptr);
        https_.configure(TcpLimits{}, "/dns-query");
        h_.other_transport = [this](const PendingClient& client, std::span<const uint8_t> r) {
            ASSERT_EQ(client.transport, Transport::Https);
            if (HttpsConnection* c = https_.find(client.tcp_connection)) {
                c->send_answer(client.stream, r);
            }
        };
    }
    ~HttpsConnectionTest() override {
        https_.close_all();
        SSL_CTX_free(ctx_);
    }

    std::unique_ptr<H2Client> connect(bool offer_h2 = true) {
        int fds[2];
        EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
        const sockaddr_storage peer = testing::loopback_peer();
        EXPECT_TRUE(https_.adopt(fds[0], peer, sizeof(sockaddr_in), ctx_));
        return std::make_unique<H2Client>(fds[1], offer_h2);
    }
    // Client and server take turns; the clock goes on `step_ms` a turn.
    void turns(H2Client& client, int count, uint64_t step_ms = 5) {
        for (int i = 0; i < count; ++i) {
            client.pump();
            h_.run_for(1, step_ms);
        }
        client.pump();
    }

    ServerHarness h_;
    HttpsConnections https_;
    testing::TestCertificate certificate_;
    SSL_CTX* ctx_ = nullptr;
};

TEST_F(HttpsConnectionTest, PostOfACachedNameIsAnswered200WithTheHeaders) {
    h_.cache_a("www.example.test");
    auto client = connect();
    const int32_t id = client->post(query("www.example.test", 0));
    turns(*client, 20);
    const Response& r = client->responses[id];
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.headers.at("content-type"), "application/dns-message");
    EXPECT_EQ(r.headers.at("content-length"), std::to_string(r.body.size()));
    const std::string max_age = r.headers.at("cache-control");
    ASSERT_EQ(max_age.rfind("max-age=", 0), 0u);
    const int age = std::stoi(max_age.substr(8));
    EXPECT_GT(age, 0);
    EXPECT_LE(age, 300);
    ASSERT_GE(r.body.size(), dns::kHeaderSize);
    EXPECT_EQ(dns::read_u16(r.body.data()), 0);  // the ID the client sent: 0
    EXPECT_EQ(h_.counters.doh_status_200.load(), 1u);
    EXPECT_EQ(h_.counters.doh_handshakes.load(), 1u);
}

TEST_F(HttpsConnectionTest, GetWithDnsParameterIsAnswered) {
    h_.cache_a("www.example.test");
    auto client = connect();
    const auto q = query("www.example.test", 0x1234);
    std::string path = "/dns-query?dns=" + encode_base64url(q.data(), q.size());
    const int32_t id = client->request("GET", path);
    turns(*client, 20);
    const Response& r = client->responses[id];
    ASSERT_EQ(r.status, 200);
    ASSERT_GE(r.body.size(), dns::kHeaderSize);
    EXPECT_EQ(dns::read_u16(r.body.data()), 0x1234);
}

TEST_F(HttpsConnectionTest, ErrorStatuses) {
    auto client = connect();
    const int32_t not_found = client->post(query("www.example.test", 0), "/other");
    const int32_t bad_type = client->post(query("www.example.test", 0), "/dns-query", "text/plain");
    const int32_t short_body = client->post({1, 2, 3});
    const int32_t method = client->request("DELETE", "/dns-query");
    const int32_t too_large = client->post(std::vector<uint8_t>(70000, 0));
    turns(*client, 60);
    EXPECT_EQ(client->responses[not_found].status, 404);
    EXPECT_EQ(client->responses[bad_type].status, 415);
    EXPECT_EQ(client->responses[short_body].status, 400);
    EXPECT_EQ(client->responses[method].status, 405);
    EXPECT_EQ(client->responses[method].headers["allow"], "GET, POST");
    EXPECT_EQ(client->responses[too_large].status, 413);
    EXPECT_FALSE(client->eof);  // errors end streams, not the connection
}

TEST_F(HttpsConnectionTest, MissesAreAnsweredOnTheirStreamsInAnyOrder) {
    auto client = connect();
    const int32_t a = client->post(query("a.example.test", 1));
    const int32_t b = client->post(query("b.example.test", 2));
    turns(*client, 20);
    ASSERT_EQ(h_.forwarder.resolved.size(), 2u);
    h_.pipeline.deliver(h_.forwarder.resolved[1].cookie, {});  // SERVFAIL, b's first
    turns(*client, 5);
    EXPECT_EQ(client->responses[b].status, 200);
    EXPECT_EQ(client->responses[a].status, 0);
    h_.pipeline.deliver(h_.forwarder.resolved[0].cookie, {});
    turns(*client, 5);
    ASSERT_EQ(client->responses[a].status, 200);
    EXPECT_EQ(dns::read_u16(client->responses[a].body.data()), 1);
    EXPECT_EQ(dns::read_u16(client->responses[b].body.data()), 2);
    EXPECT_EQ(client->responses[a].headers["cache-control"], "max-age=0");  // SERVFAIL
}

TEST_F(HttpsConnectionTest, AnswerForAStreamTheClientResetFindsNothing) {
    auto client = connect();
    const int32_t a = client->post(query("a.example.test", 1));
    turns(*client, 20);
    ASSERT_EQ(h_.forwarder.resolved.size(), 1u);
    nghttp2_submit_rst_stream(client->session(), NGHTTP2_FLAG_NONE, a, NGHTTP2_CANCEL);
    turns(*client, 5);
    h_.pipeline.deliver(h_.forwarder.resolved[0].cookie, {});
    turns(*client, 5);
    EXPECT_EQ(client->responses[a].status, 0);
    EXPECT_FALSE(client->eof);
}

TEST_F(HttpsConnectionTest, StreamWhoseBodyNeverComesIsResetAtTheReadTimeout) {
    h_.cache_a("www.example.test");
    auto client = connect();
    const int32_t stalled =
        client->post(query("www.example.test", 0), "/dns-query", "application/dns-message", false);
    turns(*client, 10);
    EXPECT_FALSE(client->responses[stalled].closed);
    const int32_t other = client->post(query("www.example.test", 5));
    turns(*client, 10);
    EXPECT_EQ(client->responses[other].status, 200);  // the connection's other streams go on
    turns(*client, 60, 100);                          // past read-timeout (5 s)
    EXPECT_TRUE(client->responses[stalled].closed);
    EXPECT_EQ(client->responses[stalled].error, static_cast<uint32_t>(NGHTTP2_CANCEL));
    EXPECT_EQ(h_.counters.doh_streams_timed_out.load(), 1u);
}

TEST_F(HttpsConnectionTest, PingFloodEndsTheConnectionWithEnhanceYourCalm) {
    auto client = connect();
    turns(*client, 10);
    for (int i = 0; i < 200; ++i)
        nghttp2_submit_ping(client->session(), NGHTTP2_FLAG_NONE, nullptr);
    turns(*client, 20);
    EXPECT_TRUE(client->goaway);
    EXPECT_EQ(client->goaway_code, static_cast<uint32_t>(NGHTTP2_ENHANCE_YOUR_CALM));
    EXPECT_TRUE(client->eof);
    EXPECT_EQ(h_.counters.doh_abuse_closed.load(), 1u);
    EXPECT_EQ(https_.size(), 0u);
}

TEST_F(HttpsConnectionTest, RapidResetEndsTheConnection) {
    auto client = connect();
    turns(*client, 10);
    for (int i = 0; i < 300; ++i) {
        const std::string name = "x" + std::to_string(i) + ".example.test";  // each a miss
        const int32_t id = client->post(query(name, static_cast<uint16_t>(i)));
        client->pump();  // the HEADERS leave first: a stream reset before it is never sent
        nghttp2_submit_rst_stream(client->session(), NGHTTP2_FLAG_NONE, id, NGHTTP2_CANCEL);
        client->pump();
        if (i % 20 == 0) turns(*client, 1, 1);
    }
    turns(*client, 30);
    // The client may still be writing resets when the connection goes: what matters is that
    // the server stopped paying for them.
    EXPECT_EQ(h_.counters.doh_abuse_closed.load(), 1u);
    EXPECT_LE(h_.counters.doh_streams.load(), 101u + HttpsConnection::kResetBurst);
    EXPECT_EQ(https_.size(), 0u);
}

TEST_F(HttpsConnectionTest, HeaderListPastTheBoundEndsTheConnection) {
    auto client = connect();
    turns(*client, 10);
    const std::string big(4000, 'x');
    std::vector<nghttp2_nv> nv;
    auto add = [&nv](std::string_view n, std::string_view v) {
        nv.push_back({reinterpret_cast<uint8_t*>(const_cast<char*>(n.data())),
                      reinterpret_cast<uint8_t*>(const_cast<char*>(v.data())), n.size(), v.size(),
                      NGHTTP2_NV_FLAG_NONE});
    };
    add(":method", "GET");
    add(":scheme", "https");
    add(":authority", "dns.test");
    add(":path", "/dns-query?dns=AAAA");
    // The same field ten times: HPACK sends it once and then indexes it, a few bytes each.
    for (int i = 0; i < 10; ++i) add("x-bomb", big);
    nghttp2_submit_request(client->session(), nullptr, nv.data(), nv.size(), nullptr, nullptr);
    turns(*client, 20);
    EXPECT_TRUE(client->goaway);
    EXPECT_TRUE(client->eof);
    EXPECT_EQ(h_.counters.doh_abuse_closed.load(), 1u);
}

TEST_F(HttpsConnectionTest, HundredConcurrentStreamsAreAllAnswered) {
    h_.cache_a("www.example.test");
    auto client = connect();
    std::vector<int32_t> ids;
    for (uint16_t i = 0; i < 100; ++i) ids.push_back(client->post(query("www.example.test", i)));
    turns(*client, 60);
    for (size_t i = 0; i < ids.size(); ++i) {
        const Response& r = client->responses[ids[i]];
        ASSERT_EQ(r.status, 200) << i;
        EXPECT_EQ(dns::read_u16(r.body.data()), i);
    }
}

TEST_F(HttpsConnectionTest, Http1ClientGets505AndIsClosed) {
    auto client = connect(false);
    client->send_raw("GET /dns-query?dns=AAAA HTTP/1.1\r\nHost: dns.test\r\n\r\n");
    turns(*client, 20);
    EXPECT_EQ(client->raw_in_.rfind("HTTP/1.1 505 ", 0), 0u) << client->raw_in_;
    EXPECT_NE(client->raw_in_.find("HTTP/2"), std::string::npos);
    EXPECT_TRUE(client->eof);
    EXPECT_EQ(h_.counters.doh_http1.load(), 1u);
}

TEST_F(HttpsConnectionTest, Http2WithoutAlpnIsServedByItsPreface) {
    h_.cache_a("www.example.test");
    auto client = connect(false);
    const int32_t id = client->post(query("www.example.test", 9));
    turns(*client, 20);
    EXPECT_EQ(client->responses[id].status, 200);
}

TEST_F(HttpsConnectionTest, HandshakeThatNeverFinishesIsClosedAtTheReadTimeout) {
    int fds[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
    const sockaddr_storage peer = testing::loopback_peer();
    ASSERT_TRUE(https_.adopt(fds[0], peer, sizeof(sockaddr_in), ctx_));
    h_.run_for(10, 100);
    EXPECT_EQ(https_.size(), 1u);
    h_.run_for(50, 100);  // past read-timeout
    EXPECT_EQ(https_.size(), 0u);
    EXPECT_EQ(h_.counters.doh_handshake_failures.load(), 1u);
    close(fds[1]);
}

TEST_F(HttpsConnectionTest, IdleConnectionIsClosedAtTheIdleTimeout) {
    h_.cache_a("www.example.test");
    auto client = connect();
    client->post(query("www.example.test", 1));
    turns(*client, 10);
    turns(*client, 90, 100);  // 9 s: under the 10 s idle timeout
    EXPECT_FALSE(client->eof);
    turns(*client, 30, 100);
    EXPECT_TRUE(client->eof);
    EXPECT_TRUE(client->goaway);
}

}  // namespace
}  // namespace nscache::server
