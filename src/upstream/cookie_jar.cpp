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
    : secret_{secure_random_u64(), secure_random_u64()},
      slot_seed_(secure_random_u64()),
      entries_(kInitialSlots) {}

CookieJar::Key CookieJar::key_of(const SocketAddress& a) {
    Key k;
    uint8_t* out = k.bytes.data();
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
    k.size = static_cast<uint8_t>(n + 2);
    return k;
}

size_t CookieJar::home(const Key& key) const {
    // Seeded: the addresses are the configuration's, but a secret seed costs nothing.
    return seeded_hash(slot_seed_, key.bytes.data(), key.size) & (entries_.size() - 1);
}

CookieJar::Entry* CookieJar::find(const Key& key) {
    const size_t mask = entries_.size() - 1;
    // Never full (at most 3/4), so an unused entry ends every probe.
    for (size_t i = home(key), n = 0; n < entries_.size(); i = (i + 1) & mask, ++n) {
        Entry& e = entries_[i];
        if (!e.used) return nullptr;
        if (e.server == key) return &e;
    }
    return nullptr;
}

CookieJar::Entry& CookieJar::claim(const Key& key) {
    if (Entry* e = find(key)) return *e;
    if ((used_ + 1) * 4 > entries_.size() * 3) {
        if (entries_.size() < kMaxSlots) {
            grow();
        } else {
            // Truly full: more servers than any sane configuration names. The newcomer takes
            // over its home slot's entry (still used, so no probe sequence breaks).
            Entry& e = entries_[home(key)];
            e = Entry{};
            e.server = key;
            e.used = true;
            e.client = derive(key);
            e.secret_epoch = secret_epoch_;
            return e;
        }
    }
    const size_t mask = entries_.size() - 1;
    size_t i = home(key);
    while (entries_[i].used) i = (i + 1) & mask;
    Entry& e = entries_[i];
    e = Entry{};
    e.server = key;
    e.used = true;
    e.client = derive(key);
    e.secret_epoch = secret_epoch_;
    ++used_;
    return e;
}

void CookieJar::grow() {
    std::vector<Entry> old(entries_.size() * 2);
    old.swap(entries_);
    const size_t mask = entries_.size() - 1;
    for (const Entry& e : old) {
        if (!e.used) continue;
        size_t i = home(e.server);
        while (entries_[i].used) i = (i + 1) & mask;
        entries_[i] = e;
    }
}

ClientCookie CookieJar::derive(const Key& key) const {
    const uint64_t h = siphash24(secret_, key.bytes.data(), key.size);
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
    const Key key = key_of(server);
    Entry& e = claim(key);
    if (e.secret_epoch != secret_epoch_) {
        e.client = derive(key);
        e.secret_epoch = secret_epoch_;
        e.server_size = 0;  // made for the old client cookie
    }
    CookieOption o;
    if (now_ms < e.cookieless_until_ms) return o;
    std::memcpy(o.bytes.data(), e.client.bytes.data(), kClientCookieSize);
    std::memcpy(o.bytes.data() + kClientCookieSize, e.server_cookie.data(), e.server_size);
    o.size = kClientCookieSize + e.server_size;
    return o;
}

CookieVerdict CookieJar::check(const SocketAddress& server, const ClientCookie& sent, bool present,
                               dns::Bytes option) {
    Entry* e = find(key_of(server));
    const bool ours = e != nullptr && e->client == sent;
    if (!present) return ours && e->server_size > 0 ? CookieVerdict::Missing : CookieVerdict::None;
    // RFC 7873 §5.3: the client cookie alone, or with a server cookie of 8 to 32 bytes.
    const size_t server_size = option.size() - std::min(option.size(), kClientCookieSize);
    if (option.size() < kClientCookieSize || (server_size > 0 && server_size < 8) ||
        server_size > 32 || std::memcmp(option.data(), sent.bytes.data(), kClientCookieSize) != 0) {
        return CookieVerdict::Wrong;
    }
    // Kept only while the entry is still for the cookie that query carried (not replaced by
    // a new secret meanwhile).
    if (ours && server_size > 0) {
        std::memcpy(e->server_cookie.data(), option.data() + kClientCookieSize, server_size);
        e->server_size = static_cast<uint8_t>(server_size);
    }
    return CookieVerdict::Good;
}

void CookieJar::forget(const SocketAddress& server) {
    if (Entry* e = find(key_of(server))) e->server_size = 0;
}

bool CookieJar::has_server_cookie(const SocketAddress& server) {
    const Entry* e = find(key_of(server));
    return e != nullptr && e->server_size > 0;
}

void CookieJar::refuses_cookies(const SocketAddress& server, uint64_t now_ms) {
    Entry& e = claim(key_of(server));
    e.server_size = 0;
    e.cookieless_until_ms = now_ms + kCookielessMs;
}

}  // namespace nscache::upstream
