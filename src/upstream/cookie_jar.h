// SPDX-License-Identifier: BSD-3-Clause
// DNS cookies towards upstream servers (RFC 7873, server cookies as RFC 9018 makes them): the
// client cookie sent with every UDP query, and the server cookie each server gave us, to echo
// on the next query to it. An answer from a server that has sent a cookie must echo ours: an
// off-path forger has 64 more bits to guess than the ID and port.
//
// The client cookie is SipHash-2-4 of the server's address under a secret from the kernel's
// CSPRNG (RFC 7873 §4.1): it differs per server, so it cannot be used to follow this client
// from one server to the next, and the secret is replaced every kSecretLifetimeMs (its server
// cookies with it: those servers hand out new ones).
//
// Bounded: an open-addressed table (linear probing, the exact address compared, the slot
// from a seeded hash) that starts at kInitialSlots and doubles while more than 3/4 full, up
// to kMaxSlots: every server a configuration can name keeps its own entry, so one server
// never wipes another's server cookie (and with it the "Missing" check, which a forger who
// guessed ID and port could otherwise pass by leaving the cookie out). Only past 3/4 of
// kMaxSlots servers does a new one take over an entry. Growing rehashes the entries (at most
// 3,072), only when a server is first asked: at most six times a worker's life.
// Owned by one worker's Resolver and used only from its thread: no locks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/siphash.h"
#include "config/address.h"
#include "dns/wire.h"

namespace nscache::upstream {

inline constexpr size_t kClientCookieSize = 8;
inline constexpr size_t kMaxCookieOption = kClientCookieSize + 32;  // RFC 7873 §4: 8 to 32

struct ClientCookie {
    std::array<uint8_t, kClientCookieSize> bytes{};
    bool operator==(const ClientCookie&) const = default;
};

// The COOKIE option's data for one query: our client cookie, then the server's if known.
struct CookieOption {
    std::array<uint8_t, kMaxCookieOption> bytes{};
    size_t size = 0;
    dns::Bytes view() const { return dns::Bytes(bytes.data(), size); }
};

// What the COOKIE option of an answer (RFC 7873 §5.3) says about it.
enum class CookieVerdict {
    Good,     // our client cookie echoed (a server cookie, if any, is kept)
    None,     // no cookie from a server that never sent one: accepted, as before cookies
    Wrong,    // another client cookie, or a malformed option: not the answer to our query
    Missing,  // no cookie from a server that sent one before: maybe a forger leaving it out
};

class CookieJar {
  public:
    static constexpr size_t kInitialSlots = 64;
    static constexpr size_t kMaxSlots = 4096;
    static constexpr uint64_t kSecretLifetimeMs = 24ull * 3600 * 1000;
    // How long a server that answered FORMERR to a query with a cookie (and never sent one
    // itself) is sent none: an old forwarder or CPE box that rejects unknown EDNS options,
    // against RFC 6891 §6.1.2. Tried again after this, in case it was upgraded.
    static constexpr uint64_t kCookielessMs = 3600ull * 1000;

    CookieJar();

    // The option to send to `server` now (rotating the secret when due); empty (size 0) for
    // a server that refuses cookies (refuses_cookies()).
    CookieOption option_for(const SocketAddress& server, uint64_t now_ms);
    // Checks an answer from `server` to a query that carried `sent` (the first bytes of the
    // option sent). `option` is the answer's COOKIE option data when `present`.
    CookieVerdict check(const SocketAddress& server, const ClientCookie& sent, bool present,
                        dns::Bytes option);
    // The server answered over TCP what came over UDP without its cookie: it stopped sending
    // cookies (a new implementation behind the address); expect none from it until it does.
    void forget(const SocketAddress& server);
    // Whether `server` has sent us a server cookie (under the current secret).
    bool has_server_cookie(const SocketAddress& server);
    // `server` answered FORMERR to a query with a cookie, never having sent one: it is sent
    // none for kCookielessMs.
    void refuses_cookies(const SocketAddress& server, uint64_t now_ms);

  private:
    // The address's identity: family, IP and port.
    struct Key {
        std::array<uint8_t, 19> bytes{};
        uint8_t size = 0;
        bool operator==(const Key&) const = default;
    };
    struct Entry {
        Key server;
        bool used = false;
        ClientCookie client;
        uint64_t secret_epoch = 0;
        std::array<uint8_t, 32> server_cookie{};
        uint8_t server_size = 0;           // 0: no server cookie from it (yet)
        uint64_t cookieless_until_ms = 0;  // refuses_cookies(): none sent before this
    };

    static Key key_of(const SocketAddress& server);
    size_t home(const Key& key) const;
    // The entry of `server`, or null.
    Entry* find(const Key& key);
    // The entry of `server`, made if new (growing the table, or taking over its home slot's
    // entry when the table is at kMaxSlots and 3/4 full).
    Entry& claim(const Key& key);
    void grow();
    ClientCookie derive(const Key& key) const;

    SipKey secret_;
    uint64_t secret_epoch_ = 0;
    uint64_t secret_born_ms_ = 0;
    bool secret_dated_ = false;
    uint64_t slot_seed_ = 0;
    std::vector<Entry> entries_;  // a power of two in size
    size_t used_ = 0;
};

// The data of the EDNS COOKIE option (code 10) in `options` (an OPT record's RDATA); false
// when there is none. The first one counts.
bool find_cookie_option(dns::Bytes options, dns::Bytes& data);

}  // namespace nscache::upstream
