// SPDX-License-Identifier: BSD-3-Clause
#include "server/tls_server.h"

#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <sys/stat.h>

#include <array>
#include <cstring>
#include <mutex>

#include "common/clock.h"
#include "common/mutex.h"

namespace nscache::server {
namespace {

// Session tickets (RFC 5077, RFC 8446 §4.6.1) are encrypted with keys only this process
// knows: one ring for the whole process, so a reload's new contexts still accept the
// tickets handed out before it. A key encrypts for kRotateMs and is still accepted for as
// long again (the client then gets a fresh ticket), so a stolen key exposes a day of
// sessions at most, not the daemon's whole uptime.
constexpr uint64_t kRotateMs = 12 * 3600 * 1000ull;

struct TicketKey {
    std::array<unsigned char, 16> name{};
    std::array<unsigned char, 32> aes{};
    std::array<unsigned char, 32> hmac{};
    uint64_t created_ms = 0;
};

class TicketKeys {
  public:
    // Copies of the key to encrypt with (rotated first when it is old enough).
    TicketKey current() {
        MutexLock lock(mu_);
        const uint64_t now = monotonic_ms();
        if (!have_current_ || now - current_.created_ms >= kRotateMs) {
            previous_ = current_;
            have_previous_ = have_current_;
            current_ = fresh(now);
            have_current_ = true;
        }
        return current_;
    }
    // The key named `name`, if it is one of the two; `old` when it is the previous one.
    bool find(const unsigned char* name, TicketKey& out, bool& old) {
        MutexLock lock(mu_);
        if (have_current_ && std::memcmp(name, current_.name.data(), 16) == 0) {
            out = current_;
            old = false;
            return true;
        }
        if (have_previous_ && std::memcmp(name, previous_.name.data(), 16) == 0 &&
            monotonic_ms() - previous_.created_ms < 2 * kRotateMs) {
            out = previous_;
            old = true;
            return true;
        }
        return false;
    }

  private:
    static TicketKey fresh(uint64_t now) {
        TicketKey k;
        RAND_bytes(k.name.data(), static_cast<int>(k.name.size()));
        RAND_bytes(k.aes.data(), static_cast<int>(k.aes.size()));
        RAND_bytes(k.hmac.data(), static_cast<int>(k.hmac.size()));
        k.created_ms = now;
        return k;
    }

    Mutex mu_;
    TicketKey current_ NSCACHE_GUARDED_BY(mu_);
    TicketKey previous_ NSCACHE_GUARDED_BY(mu_);
    bool have_current_ NSCACHE_GUARDED_BY(mu_) = false;
    bool have_previous_ NSCACHE_GUARDED_BY(mu_) = false;
};

TicketKeys& ticket_keys() {
    static TicketKeys keys;
    return keys;
}

bool set_mac_key(EVP_MAC_CTX* mac, std::array<unsigned char, 32>& key) {
    char digest[] = "SHA256";
    OSSL_PARAM params[] = {
        OSSL_PARAM_construct_octet_string(OSSL_MAC_PARAM_KEY, key.data(), key.size()),
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
        OSSL_PARAM_construct_end(),
    };
    return EVP_MAC_CTX_set_params(mac, params) == 1;
}

// OpenSSL's ticket callback: 1 = use this key, 2 = decrypted with an old key (issue a new
// ticket), 0 = unknown key (full handshake), -1 = error.
int ticket_key_callback(SSL*, unsigned char key_name[16], unsigned char iv[16],
                        EVP_CIPHER_CTX* cipher, EVP_MAC_CTX* mac, int encrypt) {
    if (encrypt == 1) {
        TicketKey key = ticket_keys().current();
        if (RAND_bytes(iv, 16) != 1) return -1;
        std::memcpy(key_name, key.name.data(), 16);
        if (EVP_EncryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes.data(), iv) != 1) {
            return -1;
        }
        return set_mac_key(mac, key.hmac) ? 1 : -1;
    }
    TicketKey key;
    bool old = false;
    if (!ticket_keys().find(key_name, key, old)) return 0;
    if (!set_mac_key(mac, key.hmac)) return -1;
    if (EVP_DecryptInit_ex(cipher, EVP_aes_256_cbc(), nullptr, key.aes.data(), iv) != 1) {
        return -1;
    }
    return old ? 2 : 1;
}

// The first protocol of `wanted` (ALPN wire form) that the client offered.
int select_from(const unsigned char** out, unsigned char* out_length, const unsigned char* offered,
                unsigned int offered_length, const unsigned char* wanted,
                unsigned int wanted_length) {
    unsigned char* chosen = nullptr;
    if (SSL_select_next_proto(&chosen, out_length, wanted, wanted_length, offered,
                              offered_length) != OPENSSL_NPN_NEGOTIATED) {
        // No protocol in common: go on without ALPN (a DoT client need not offer "dot"; a
        // DoH client that offered something else gets an HTTP answer saying what we speak).
        return SSL_TLSEXT_ERR_NOACK;
    }
    *out = chosen;
    return SSL_TLSEXT_ERR_OK;
}

int select_dot(SSL*, const unsigned char** out, unsigned char* out_length,
               const unsigned char* offered, unsigned int offered_length, void*) {
    static const unsigned char kDot[] = {3, 'd', 'o', 't'};
    return select_from(out, out_length, offered, offered_length, kDot, sizeof kDot);
}

int select_doh(SSL*, const unsigned char** out, unsigned char* out_length,
               const unsigned char* offered, unsigned int offered_length, void*) {
    static const unsigned char kHttp[] = {2, 'h', '2', 8, 'h', 't', 't', 'p', '/', '1', '.', '1'};
    return select_from(out, out_length, offered, offered_length, kHttp, sizeof kHttp);
}

std::string openssl_error() {
    const unsigned long e = ERR_get_error();
    ERR_clear_error();
    if (e == 0) return "unknown OpenSSL error";
    char text[256];
    ERR_error_string_n(e, text, sizeof text);
    return text;
}

}  // namespace

TlsServerContext::~TlsServerContext() {
    SSL_CTX_free(ctx_);
}

std::shared_ptr<const TlsServerContext> TlsServerContext::create(
    const std::string& certificate_file, const std::string& key_file, TlsListenerKind kind,
    std::string& error, std::string& warning) {
    ERR_clear_error();
    if (certificate_file.empty() || key_file.empty()) {
        error = "a DNS over TLS or HTTPS listener needs tls-certificate and tls-private-key";
        return nullptr;
    }
    struct stat key_stat {};
    if (stat(key_file.c_str(), &key_stat) != 0) {
        error = "tls-private-key " + key_file + ": " + std::strerror(errno);
        return nullptr;
    }
    if ((key_stat.st_mode & S_IROTH) != 0) {
        warning = "tls-private-key " + key_file +
                  " is readable by every user: chmod 0640 (owner root, group nscache)";
    }
    SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
    if (ctx == nullptr) {
        error = "cannot make a TLS server context: " + openssl_error();
        return nullptr;
    }
    auto fail = [&](const std::string& what) {
        error = what + ": " + openssl_error();
        SSL_CTX_free(ctx);
        return nullptr;
    };
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    if (SSL_CTX_use_certificate_chain_file(ctx, certificate_file.c_str()) != 1) {
        return fail("tls-certificate " + certificate_file);
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH) {
            return fail("tls-private-key " + key_file + " does not match tls-certificate " +
                        certificate_file);
        }
        return fail("tls-private-key " + key_file);
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        return fail("tls-private-key " + key_file + " does not match tls-certificate " +
                    certificate_file);
    }
    // Resumption by tickets only: no per-session state held for clients.
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_num_tickets(ctx, 1);
    SSL_CTX_set_tlsext_ticket_key_evp_cb(ctx, ticket_key_callback);
    SSL_CTX_set_alpn_select_cb(ctx, kind == TlsListenerKind::Dot ? select_dot : select_doh,
                               nullptr);
    return std::shared_ptr<const TlsServerContext>(new TlsServerContext(ctx, kind));
}

bool load_tls_contexts(const Config& config, TlsContexts& out, std::string& error,
                       std::vector<std::string>& warnings) {
    out = {};
    std::string warning;
    if (!config.listen_tls.empty()) {
        out.dot = TlsServerContext::create(config.tls_certificate, config.tls_private_key,
                                           TlsListenerKind::Dot, error, warning);
        if (!out.dot) return false;
    }
    if (!config.listen_https.empty()) {
        out.doh = TlsServerContext::create(config.tls_certificate, config.tls_private_key,
                                           TlsListenerKind::Doh, error, warning);
        if (!out.doh) return false;
    }
    if (!warning.empty()) warnings.push_back(warning);
    return true;
}

}  // namespace nscache::server
