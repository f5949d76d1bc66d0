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
// Bounded: a direct-mapped table of kSlots servers; two servers on one slot take turns (the
// one pushed out is sent the client cookie alone next time, and answers with a new server
// cookie). Owned by one worker's Resolver and used only from its thread: no locks.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

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
    static constexpr size_t kSlots = 64;
    static constexpr uint64_t kSecretLifetimeMs = 24ull * 3600 * 1000;

    CookieJar();

    // The option to send to `server` now (rotating the secret when due).
    CookieOption option_for(const SocketAddress& server, uint64_t now_ms);
    // Checks an answer from `server` to a query that carried `sent` (the first bytes of the
    // option sent). `option` is the answer's COOKIE option data when `present`.
    CookieVerdict check(const SocketAddress& server, const ClientCookie& sent, bool present,
                        dns::Bytes option);
    // The server answered over TCP what came over UDP without its cookie: it stopped sending
    // cookies (a new implementation behind the address); expect none from it until it does.
    void forget(const SocketAddress& server);

  private:
    struct Entry {
        SocketAddress server;
        bool used = false;
        ClientCookie client;
        uint64_t secret_epoch = 0;
        std::array<uint8_t, 32> server_cookie{};
        uint8_t server_size = 0;  // 0: no server cookie from it (yet)
    };

    Entry& slot(const SocketAddress& server);
    ClientCookie derive(const SocketAddress& server) const;

    SipKey secret_;
    uint64_t secret_epoch_ = 0;
    uint64_t secret_born_ms_ = 0;
    bool secret_dated_ = false;
    uint64_t slot_seed_ = 0;
    std::array<Entry, kSlots> entries_{};
};

// The data of the EDNS COOKIE option (code 10) in `options` (an OPT record's RDATA); false
// when there is none. The first one counts.
bool find_cookie_option(dns::Bytes options, dns::Bytes& data);

}  // namespace nscache::upstream
