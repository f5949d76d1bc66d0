// SPDX-License-Identifier: BSD-3-Clause
#include "server/tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <climits>

namespace nscache::server {

TlsStream::TlsStream(int fd, ssl_ctx_st* ctx) {
    ssl_ = SSL_new(ctx);
    if (ssl_ == nullptr) return;
    if (SSL_set_fd(ssl_, fd) != 1) {
        SSL_free(ssl_);
        ssl_ = nullptr;
        return;
    }
    SSL_set_accept_state(ssl_);
    // A write that returns early (the socket's buffer filled) is retried with the rest, from
    // a buffer that may have moved meanwhile (the caller's queue grows).
    SSL_set_mode(ssl_, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // DNS clients often close without close_notify once they have their answers: that is
    // the end of the connection, not an attack on it (a truncation cannot cut a framed
    // message into a different valid one).
    SSL_set_options(ssl_, SSL_OP_IGNORE_UNEXPECTED_EOF);
}

TlsStream::~TlsStream() {
    if (ssl_ != nullptr) SSL_free(ssl_);
}

TlsStream::Io TlsStream::status_of(int result) {
    switch (SSL_get_error(ssl_, result)) {
        case SSL_ERROR_WANT_READ:
            return Io::WantRead;
        case SSL_ERROR_WANT_WRITE:
            return Io::WantWrite;
        case SSL_ERROR_ZERO_RETURN:
            return Io::Closed;
        case SSL_ERROR_SYSCALL:
            // EOF without close_notify (result 0 with nothing queued) is a plain close; the
            // thread's error queue must not leak into the next connection's calls.
            {
                const bool plain_eof = ERR_peek_error() == 0 && result == 0;
                ERR_clear_error();
                return plain_eof ? Io::Closed : Io::Failed;
            }
        default:
            ERR_clear_error();
            return Io::Failed;
    }
}

TlsStream::Io TlsStream::handshake() {
    if (handshake_done_) return Io::Done;
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) {
        handshake_done_ = true;
        return Io::Done;
    }
    const Io io = status_of(r);
    return io == Io::Closed ? Io::Failed : io;  // a client that left mid-handshake failed it
}

bool TlsStream::resumed() const {
    return ssl_ != nullptr && SSL_session_reused(ssl_) == 1;
}

std::string_view TlsStream::alpn() const {
    const unsigned char* data = nullptr;
    unsigned int length = 0;
    if (ssl_ != nullptr) SSL_get0_alpn_selected(ssl_, &data, &length);
    return data == nullptr ? std::string_view()
                           : std::string_view(reinterpret_cast<const char*>(data), length);
}

TlsStream::Io TlsStream::read(uint8_t* buffer, size_t size, size_t& moved) {
    moved = 0;
    const int n = SSL_read(ssl_, buffer, static_cast<int>(size > INT_MAX ? INT_MAX : size));
    if (n > 0) {
        moved = static_cast<size_t>(n);
        return Io::Done;
    }
    return status_of(n);
}

TlsStream::Io TlsStream::write(const uint8_t* data, size_t size, size_t& moved) {
    moved = 0;
    if (size == 0) return Io::Done;
    const int n = SSL_write(ssl_, data, static_cast<int>(size > INT_MAX ? INT_MAX : size));
    if (n > 0) {
        moved = static_cast<size_t>(n);
        return Io::Done;
    }
    const Io io = status_of(n);
    return io == Io::Closed ? Io::Failed : io;
}

size_t TlsStream::buffered() const {
    return ssl_ != nullptr ? static_cast<size_t>(SSL_pending(ssl_)) : 0;
}

void TlsStream::shutdown() {
    if (ssl_ == nullptr || !handshake_done_) return;
    // Best effort: one try; a peer that does not read it is closed anyway.
    if (SSL_shutdown(ssl_) < 0) ERR_clear_error();
}

}  // namespace nscache::server
