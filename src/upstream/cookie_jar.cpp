// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/cookie_jar.h"

#include <netinet/in.h>

#include <algorithm>
#include <cstring>

#include "common/hash.h"
#include "common/random.h"

namespace nscache::upstream {
namespace {

constexpr uint16_t kCookieOptionCode = 10;  // RFC 7873 §4

// The address's identity: family, IP and port (what a server is to us).
size_t address_bytes(const SocketAddress& a, uint8_t out[20]) {
    size_t n = 0;
    out[n++] = static_cast<uint8_t>(a.family());
    if (a.family() == AF_INET6) {
        const auto* s6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
        std::memcpy(out + n, &s6->sin6_addr, 16);
        n += 16;
        std::memcpy(out + n, &s6->sin6_port, 2);
    } else {
        const auto* s4 = reinterpret_cast<const sockaddr_in*>(&a.storage);
        std::memcpy(out + n, &s4->sin_addr, 4);
        n += 4;
        std::memcpy(out + n, &s4->sin_port, 2);
    }
    return n + 2;
}

}  // namespace

bool find_cookie_option(dns::Bytes options, dns::Bytes& data) {
    size_t at = 0;
    while (at + 4 <= options.size()) {
        const uint16_t code = dns::read_u16(&options[at]);
        const uint16_t length = dns::read_u16(&options[at + 2]);
        if (at + 4 + length > options.size()) return false;
        if (code == kCookieOptionCode) {
            data = options.subspan(at + 4, length);
            return true;
        }
        at += 4 + size_t{length};
    }
    return false;
}

CookieJar::CookieJar()
    : secret_{secure_random_u64(), secure_random_u64()}, slot_seed_(secure_random_u64()) {}

CookieJar::Entry& CookieJar::slot(const SocketAddress& server) {
    uint8_t key[20];
    const size_t n = address_bytes(server, key);
    return entries_[seeded_hash(slot_seed_, key, n) % kSlots];
}

ClientCookie CookieJar::derive(const SocketAddress& server) const {
    uint8_t key[20];
    const size_t n = address_bytes(server, key);
    const uint64_t h = siphash24(secret_, key, n);
    ClientCookie c;
    std::memcpy(c.bytes.data(), &h, sizeof h);
    return c;
}

CookieOption CookieJar::option_for(const SocketAddress& server, uint64_t now_ms) {
    if (!secret_dated_) {
        secret_born_ms_ = now_ms;
        secret_dated_ = true;
    } else if (now_ms - secret_born_ms_ >= kSecretLifetimeMs) {
        secret_ = SipKey{secure_random_u64(), secure_random_u64()};
        ++secret_epoch_;
        secret_born_ms_ = now_ms;
    }
    Entry& e = slot(server);
    if (!e.used || !(e.server == server) || e.secret_epoch != secret_epoch_) {
        e = Entry{};
        e.server = server;
        e.used = true;
        e.client = derive(server);
        e.secret_epoch = secret_epoch_;
    }
    CookieOption o;
    std::memcpy(o.bytes.data(), e.client.bytes.data(), kClientCookieSize);
    std::memcpy(o.bytes.data() + kClientCookieSize, e.server_cookie.data(), e.server_size);
    o.size = kClientCookieSize + e.server_size;
    return o;
}

CookieVerdict CookieJar::check(const SocketAddress& server, const ClientCookie& sent, bool present,
                               dns::Bytes option) {
    Entry& e = slot(server);
    const bool ours = e.used && e.server == server && e.client == sent;
    if (!present) return ours && e.server_size > 0 ? CookieVerdict::Missing : CookieVerdict::None;
    // RFC 7873 §5.3: the client cookie alone, or with a server cookie of 8 to 32 bytes.
    const size_t server_size = option.size() - std::min(option.size(), kClientCookieSize);
    if (option.size() < kClientCookieSize || (server_size > 0 && server_size < 8) ||
        server_size > 32 || std::memcmp(option.data(), sent.bytes.data(), kClientCookieSize) != 0) {
        return CookieVerdict::Wrong;
    }
    // Kept only while the entry is still for the cookie that query carried (not pushed out by
    // another server or replaced by a new secret meanwhile).
    if (ours && server_size > 0) {
        std::memcpy(e.server_cookie.data(), option.data() + kClientCookieSize, server_size);
        e.server_size = static_cast<uint8_t>(server_size);
    }
    return CookieVerdict::Good;
}

void CookieJar::forget(const SocketAddress& server) {
    Entry& e = slot(server);
    if (e.used && e.server == server) e.server_size = 0;
}

}  // namespace nscache::upstream
