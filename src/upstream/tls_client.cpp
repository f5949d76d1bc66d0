// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/tls_client.h"

#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <cstring>

#include "common/log.h"

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

// The chain from `leaf` that X509_verify_cert builds and verifies (each certificate signed by
// the next) against `anchors`, or with the sent certificates as anchors when `partial`;
// true when a certificate of it carries the pin. No name, purpose or policy is checked: the
// pin stands for those (RFC 7858 §4.2).
bool verified_chain_has_pin(X509* leaf, STACK_OF(X509) * sent, X509_STORE* anchors, bool partial,
                            const std::string& pin) {
    X509_STORE_CTX* ctx = X509_STORE_CTX_new();
    if (ctx == nullptr) return false;
    bool found = false;
    if (X509_STORE_CTX_init(ctx, anchors, leaf, sent) == 1) {
        if (partial) X509_STORE_CTX_set_flags(ctx, X509_V_FLAG_PARTIAL_CHAIN);
        if (X509_verify_cert(ctx) == 1) {
            STACK_OF(X509)* chain = X509_STORE_CTX_get0_chain(ctx);
            for (int i = 0; !found && chain != nullptr && i < sk_X509_num(chain); ++i) {
                found = spki_matches(sk_X509_value(chain, i), pin);
            }
        }
    }
    X509_STORE_CTX_free(ctx);
    ERR_clear_error();
    return found;
}

// RFC 7858 §4.2 pins the SPKI of the server's key or of a CA in its verified chain. Only the
// leaf's key is proved by the handshake (its signature over the transcript); the other
// certificates the server sends are public and anyone can send them along with a leaf of
// their own. So a pin counts on the leaf, or on a certificate the chain from the leaf
// verifies to by signatures: one the server sent (anchors: the sent certificates but the
// leaf, for a private CA no trust store holds), or one of the trust store (a root the server
// leaves out, as servers do).
bool pin_proved(SSL* ssl, const std::string& pin) {
    X509* leaf = SSL_get0_peer_certificate(ssl);
    if (leaf == nullptr) return false;
    if (spki_matches(leaf, pin)) return true;
    STACK_OF(X509)* sent = SSL_get_peer_cert_chain(ssl);  // the leaf first, on a client
    X509_STORE* sent_anchors = X509_STORE_new();
    if (sent_anchors == nullptr) return false;
    for (int i = 0; sent != nullptr && i < sk_X509_num(sent); ++i) {
        X509* cert = sk_X509_value(sent, i);
        if (X509_cmp(cert, leaf) != 0) X509_STORE_add_cert(sent_anchors, cert);
    }
    bool found = verified_chain_has_pin(leaf, sent, sent_anchors, true, pin);
    X509_STORE_free(sent_anchors);
    if (!found) {
        X509_STORE* trust = SSL_CTX_get_cert_store(SSL_get_SSL_CTX(ssl));
        found = trust != nullptr && verified_chain_has_pin(leaf, sent, trust, false, pin);
    }
    return found;
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
    bool loaded = true;
    if (!settings.ca_file.empty()) {
        loaded = SSL_CTX_load_verify_locations(ctx, settings.ca_file.c_str(), nullptr) == 1;
    } else if (settings.system_store_now) {
        loaded = SSL_CTX_set_default_verify_paths(ctx) == 1;
        std::call_once(client->system_store_once_, [] {});  // done: nothing left for later
    }
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

void TlsClient::load_system_store_once() const {
    std::call_once(system_store_once_, [this] {
        if (!settings_.ca_file.empty()) return;
        // Unauthenticated from here on if it fails: strict mode then uses no TLS server.
        if (SSL_CTX_set_default_verify_paths(ctx_) != 1) {
            log_error("TLS: cannot load the system trust store: %s", openssl_error().c_str());
        }
    });
}

SSL* TlsClient::new_session(int fd, const TlsPeer& peer) const {
    load_system_store_once();
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
        if (pin_proved(ssl, peer.spki_sha256)) return true;
        why = "no certificate the server proved matches the pinned SPKI hash";
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
