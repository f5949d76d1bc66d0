// Which clients get answers (config `allow`); the rest get REFUSED. Read-only after start,
// so workers share it without locks.
#pragma once

#include <netinet/in.h>
#include <sys/socket.h>

#include <vector>

#include "config/address.h"

namespace nscache::server {

inline bool is_loopback(const sockaddr* sa) {
    if (sa->sa_family == AF_INET) {
        return (reinterpret_cast<const uint8_t*>(
                   &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr))[0] == 127;
    }
    const in6_addr& a = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr;
    return IN6_IS_ADDR_LOOPBACK(&a) || (IN6_IS_ADDR_V4MAPPED(&a) && a.s6_addr[12] == 127);
}

class AccessList {
  public:
    explicit AccessList(std::vector<Cidr> allowed) : allowed_(std::move(allowed)) {}

    bool allows(const sockaddr* client) const {
        for (const Cidr& c : allowed_) {
            if (c.contains(client)) return true;
        }
        return false;
    }

  private:
    std::vector<Cidr> allowed_;
};

}  // namespace nscache::server
