// Which clients get answers (config `allow`); the rest get REFUSED. Read-only after start,
// so workers share it without locks.
#pragma once

#include <sys/socket.h>

#include <vector>

#include "config/address.h"

namespace nscache::server {

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
