// SPDX-License-Identifier: BSD-3-Clause
// The server side of TLS, for the DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484)
// listeners: one OpenSSL context per listener kind, built from the configured certificate
// (PEM, the chain after the leaf) and private key. TLS 1.2 and 1.3; session resumption by
// tickets whose keys rotate (TicketKeys below: process-wide, so a reload that builds new
// contexts does not void the tickets already handed out); ALPN: "dot" for DoT (a client that
// offers none is served too), "h2" for DoH (a client that offers only "http/1.1" gets it, and
// is answered as https_connection.h says).
//
// Built by make_settings() on the thread that builds Settings (start-up, reload), read-only
// afterwards: workers call SSL_new() on ctx() from their own threads, which OpenSSL allows.
// A connection's SSL object holds its own reference on the context, so an open connection
// keeps the old certificate after a reload replaced the context, and new ones get the new.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"

struct ssl_ctx_st;

namespace nscache::server {

enum class TlsListenerKind { Dot, Doh };

class TlsServerContext {
  public:
    // nullptr with `error` saying which file and why (unreadable, not PEM, the key does not
    // match the certificate...). `warning` is set (and the context still made) when the key
    // file is readable by others than its owner and group, as nscache reads it as root.
    static std::shared_ptr<const TlsServerContext> create(const std::string& certificate_file,
                                                          const std::string& key_file,
                                                          TlsListenerKind kind, std::string& error,
                                                          std::string& warning);
    ~TlsServerContext();
    TlsServerContext(const TlsServerContext&) = delete;
    TlsServerContext& operator=(const TlsServerContext&) = delete;

    ssl_ctx_st* ctx() const { return ctx_; }
    TlsListenerKind kind() const { return kind_; }

  private:
    TlsServerContext(ssl_ctx_st* ctx, TlsListenerKind kind) : ctx_(ctx), kind_(kind) {}

    ssl_ctx_st* const ctx_;
    const TlsListenerKind kind_;
};

// The contexts a configuration's listeners use: null where it has no such listener.
struct TlsContexts {
    std::shared_ptr<const TlsServerContext> dot;
    std::shared_ptr<const TlsServerContext> doh;
};

// Reads tls-certificate and tls-private-key for the listeners `config` has (nothing when it
// has none). False with `error` set when they cannot be used, or a listener has no
// certificate or key; `warnings` says what works but should not be so (a key others may read).
bool load_tls_contexts(const Config& config, TlsContexts& out, std::string& error,
                       std::vector<std::string>& warnings);

}  // namespace nscache::server
