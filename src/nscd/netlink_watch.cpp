// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/netlink_watch.h"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"
#include "common/random.h"

namespace nscache::nscd {

NetlinkWatch::~NetlinkWatch() {
    if (fd_ >= 0) {
        if (loop_ != nullptr) loop_->remove(registration_);
        close(fd_);
    }
}

bool NetlinkWatch::open(EventLoop& loop, std::function<void(uint32_t)> changed) {
    loop_ = &loop;
    changed_ = std::move(changed);
    // A random start: a process that kept interface data from a previous daemon must not
    // find the same number again after changes it did not see.
    while (stamp_ == 0) stamp_ = static_cast<uint32_t>(secure_random_u64());
    fd_ = socket(AF_NETLINK, SOCK_RAW | SOCK_NONBLOCK | SOCK_CLOEXEC, NETLINK_ROUTE);
    if (fd_ < 0) {
        log_warning("nscd socket: no netlink (%s): interface changes are not announced",
                    std::strerror(errno));
        return false;
    }
    sockaddr_nl addr{};
    addr.nl_family = AF_NETLINK;
    addr.nl_groups = RTMGRP_IPV4_IFADDR | RTMGRP_TC | RTMGRP_IPV4_MROUTE | RTMGRP_IPV4_ROUTE |
                     RTMGRP_IPV4_RULE | RTMGRP_IPV6_IFADDR | RTMGRP_IPV6_MROUTE |
                     RTMGRP_IPV6_ROUTE | RTMGRP_IPV6_IFINFO | RTMGRP_IPV6_PREFIX;
    if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        !loop.add(fd_, EPOLLIN, this, registration_)) {
        log_warning("nscd socket: cannot watch netlink (%s): interface changes are not announced",
                    std::strerror(errno));
        close(fd_);
        fd_ = -1;
        return false;
    }
    return true;
}

void NetlinkWatch::bump() {
    ++stamp_;
    if (stamp_ == 0) ++stamp_;  // 0 means "no nscd" to the client
    if (changed_) changed_(stamp_);
}

void NetlinkWatch::on_event(uint32_t) {
    char buffer[8192];
    bool any = false;
    for (int i = 0; i < 64; ++i) {
        const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
        if (n < 0 && errno == EINTR) continue;
        // ENOBUFS: messages were lost, so something changed all the same.
        if (n < 0 && errno != ENOBUFS) break;
        any = true;
    }
    if (any) bump();
}

}  // namespace nscache::nscd
