// SPDX-License-Identifier: BSD-3-Clause
// One accepted connection's server side of TLS, over a non-blocking socket it does not own:
// the handshake, then reads and writes of plaintext, each step saying what the socket must
// become (readable, writable) before the step can go on. Shared by the DNS over TLS
// connections (tcp_connection.h) and the DNS over HTTPS ones (https_connection.h), which
// each keep their own framing above it. Used only from the thread of the worker that owns
// the connection.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string_view>

struct ssl_ctx_st;
struct ssl_st;

namespace nscache::server {

class TlsStream {
  public:
    enum class Io : uint8_t {
        Done,       // the step finished (handshake), or bytes moved (read, write)
        WantRead,   // call again once the socket is readable
        WantWrite,  // call again once the socket is writable
        Closed,     // the peer closed (close_notify or EOF)
        Failed,     // a TLS or socket error: close the connection
    };

    // Takes a reference on `ctx` (SSL_new): the context may be released meanwhile.
    TlsStream(int fd, ssl_ctx_st* ctx);
    ~TlsStream();  // frees the SSL object; the caller closes the descriptor
    TlsStream(const TlsStream&) = delete;
    TlsStream& operator=(const TlsStream&) = delete;

    // False when OpenSSL could not make the SSL object: close the connection.
    bool usable() const { return ssl_ != nullptr; }

    Io handshake();
    bool handshake_done() const { return handshake_done_; }
    // After the handshake: whether it resumed a session, and the protocol ALPN chose ("" if
    // none).
    bool resumed() const;
    std::string_view alpn() const;

    // Plaintext in and out. `moved` is what was read or written (> 0 only with Io::Done).
    Io read(uint8_t* buffer, size_t size, size_t& moved);
    Io write(const uint8_t* data, size_t size, size_t& moved);
    // Plaintext OpenSSL already decrypted and holds: the socket will not become readable for
    // it, so a reader that paused must read again without waiting for an event.
    size_t buffered() const;
    // Sends close_notify, best effort, without waiting for the peer's.
    void shutdown();

  private:
    Io status_of(int result);

    ssl_st* ssl_ = nullptr;
    bool handshake_done_ = false;
};

}  // namespace nscache::server
