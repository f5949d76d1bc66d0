#include "upstream/tls_client.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>

namespace nscache::upstream {
namespace {

std::string openssl_error() {
    char text[256] = "unknown error";
    if (const unsigned long e = ERR_get_error()) ERR_error_string_n(e, text, sizeof text);
    ERR_clear_error();
    return text;
}

bool spki_matches(X509* cert, const std::string& pin) {
    unsigned char* der = nullptr;
    const int len = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    if (len <= 0) return false;
    unsigned char digest[EVP_MAX_MD_SIZE];
    unsigned int digest_len = 0;
    const bool ok =
        EVP_Digest(der, static_cast<size_t>(len), digest, &digest_len, EVP_sha256(), nullptr) == 1;
    OPENSSL_free(der);
    return ok && digest_len == pin.size() && std::memcmp(digest, pin.data(), pin.size()) == 0;
}

// A session the server handed out (after the handshake, in TLS 1.3): kept in the slot the
// connection set as the SSL's app data, and offered on its next connect.
int remember_session(SSL* ssl, SSL_SESSION* session) {
    auto** slot = static_cast<SSL_SESSION**>(SSL_get_app_data(ssl));
    if (slot == nullptr) return 0;
    if (*slot != nullptr) SSL_SESSION_free(*slot);
    *slot = session;
    return 1;  // we keep the reference
}

}  // namespace

std::unique_ptr<TlsClient> TlsClient::create(const TlsSettings& settings, std::string& error) {
    std::unique_ptr<TlsClient> client(new TlsClient(settings));
    client->ctx_ = SSL_CTX_new(TLS_client_method());
    if (client->ctx_ == nullptr) {
        error = "TLS: " + openssl_error();
        return nullptr;
    }
    SSL_CTX* ctx = client->ctx_;
    // RFC 8310 §9: TLS 1.2 at least; 1.3 is what a current server negotiates.
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    // Partial writes: a pipelined query may be half sent when the socket buffer fills.
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
                              SSL_MODE_RELEASE_BUFFERS);
    // Resumption (RFC 7858 §3.4): the connection keeps the session a server hands out and
    // offers it on its next connect; OpenSSL's own client cache is not used.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    SSL_CTX_sess_set_new_cb(ctx, remember_session);
    const bool loaded = settings.ca_file.empty() ? SSL_CTX_set_default_verify_paths(ctx) == 1
                                                 : SSL_CTX_load_verify_locations(
                                                       ctx, settings.ca_file.c_str(), nullptr) == 1;
    if (!loaded) {
        error = "TLS: cannot load " +
                (settings.ca_file.empty() ? std::string("the system trust store")
                                          : "tls-ca-file '" + settings.ca_file + "'") +
                ": " + openssl_error();
        return nullptr;
    }
    // The handshake always completes; authenticated() decides afterwards, so that the pin,
    // the chain and the name are judged in one place and opportunistic mode can go on.
    SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nullptr);
    return client;
}

TlsClient::~TlsClient() {
    SSL_CTX_free(ctx_);
}

SSL* TlsClient::new_session(int fd, const TlsPeer& peer) const {
    SSL* ssl = SSL_new(ctx_);
    if (ssl == nullptr) return nullptr;
    if (SSL_set_fd(ssl, fd) != 1) {
        SSL_free(ssl);
        return nullptr;
    }
    if (!peer.auth_name.empty()) {
        SSL_set_tlsext_host_name(ssl, peer.auth_name.c_str());
        SSL_set1_host(ssl, peer.auth_name.c_str());
    } else {
        X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), peer.ip.c_str());
    }
    return ssl;
}

bool TlsClient::authenticated(SSL* ssl, const TlsPeer& peer, std::string& why) {
    if (!peer.spki_sha256.empty()) {
        // RFC 7858 §4.2: a pin on any certificate of the chain the server sent.
        STACK_OF(X509)* chain = SSL_get_peer_cert_chain(ssl);
        for (int i = 0; chain != nullptr && i < sk_X509_num(chain); ++i) {
            if (spki_matches(sk_X509_value(chain, i), peer.spki_sha256)) return true;
        }
        why = "no certificate matches the pinned SPKI hash";
        return false;
    }
    X509* cert = SSL_get1_peer_certificate(ssl);
    if (cert == nullptr) {
        why = "no certificate";
        return false;
    }
    X509_free(cert);
    const long result = SSL_get_verify_result(ssl);
    if (result != X509_V_OK) {
        why = X509_verify_cert_error_string(result);
        return false;
    }
    return true;
}

}  // namespace nscache::upstream
