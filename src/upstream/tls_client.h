// SPDX-License-Identifier: BSD-3-Clause
// DNS over TLS (RFC 7858) client side: one OpenSSL context for the whole daemon, built at
// start from the settings (trust store or tls-ca-file, TLS 1.2 at least, 1.3 preferred,
// client session tickets for resumption), and the check that decides whether a finished
// handshake authenticated the server: a pinned SPKI hash (RFC 7858 §4.2) when one is
// configured for it (on the key the handshake proved, or on a CA the chain from that leaf
// verifies to), otherwise the certificate chain against the trust store and the server's
// authentication name (or, without a name, its IP address).
//
// The context is read-only after start and shared by every worker (OpenSSL allows SSL_new on
// one SSL_CTX from many threads); each SSL object belongs to the worker that made it. The one
// write after start, a deferred system trust store, happens once (std::call_once) before the
// first SSL object is made from the context.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "config/address.h"

struct ssl_ctx_st;
struct ssl_st;

namespace nscache::upstream {

struct TlsSettings {
    std::string ca_file;  // empty: the system trust store
    TlsAuth auth = TlsAuth::Strict;
    // The system trust store (ca_file empty) is loaded at create() when this is set (a tls://
    // upstream is configured at start), otherwise by the first new_session(): parsing it is
    // 236M instructions, most of a restart's start-up for a daemon with no DNS over TLS.
    // A tls-ca-file is always read at create(), so a bad one is a config error at start.
    bool system_store_now = true;
};

// What one connection must verify.
struct TlsPeer {
    std::string auth_name;    // empty: the certificate must name the IP address
    std::string ip;           // the address in text, for the IP check
    std::string spki_sha256;  // 32 raw bytes, or empty: no pin
};

class TlsClient {
  public:
    // nullopt with `error` set when the context cannot be built (a bad CA file...).
    static std::unique_ptr<TlsClient> create(const TlsSettings& settings, std::string& error);
    ~TlsClient();
    TlsClient(const TlsClient&) = delete;
    TlsClient& operator=(const TlsClient&) = delete;

    TlsAuth auth() const { return settings_.auth; }

    // A new client SSL for `peer` on descriptor `fd`, set up for SNI and the name check;
    // nullptr if OpenSSL refuses.
    ssl_st* new_session(int fd, const TlsPeer& peer) const;
    // After the handshake: true when the server proved who it is, else `why` says what failed.
    static bool authenticated(ssl_st* ssl, const TlsPeer& peer, std::string& why);

  private:
    explicit TlsClient(const TlsSettings& settings) : settings_(settings) {}

    // The system trust store, if create() left it for later.
    void load_system_store_once() const;

    const TlsSettings settings_;
    ssl_ctx_st* ctx_ = nullptr;
    mutable std::once_flag system_store_once_;
};

}  // namespace nscache::upstream
