// SPDX-License-Identifier: BSD-3-Clause
// Listening sockets this process was given instead of binding them itself, by name: systemd's
// socket activation (sd_listen_fds(3): LISTEN_PID, LISTEN_FDS, LISTEN_FDNAMES, descriptors
// from 3) or another nscache handing its sockets over (--takeover, SCM_RIGHTS). The opening
// steps (DNS sockets, NSS and nscd fronts, control socket) take their names out of it before
// they would bind; whatever nobody took is closed with the registry.
//
// Names and what each must be (checked by validate(), never trusted):
// - "dns-udp": AF_INET/AF_INET6 datagram socket of protocol UDP, bound (several allowed)
// - "dns-tcp": AF_INET/AF_INET6 stream socket of protocol TCP, listening (several allowed)
// - "control", "nss", "nscd": AF_UNIX stream socket, listening (one each)
// - "metrics", "health" (a takeover's only, never socket activation's): as "dns-tcp"
// A protocol other than UDP or TCP (UDP-Lite, SCTP, MPTCP) is refused: the workers set
// options and read datagrams as UDP and TCP define them.
//
// Thread-safety: none; the main thread at start-up only.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"

namespace nscache {

class InheritedSockets {
  public:
    static constexpr const char* kDnsUdp = "dns-udp";
    static constexpr const char* kDnsTcp = "dns-tcp";
    static constexpr const char* kControl = "control";
    static constexpr const char* kNss = "nss";
    static constexpr const char* kNscd = "nscd";
    static constexpr const char* kMetrics = "metrics";
    static constexpr const char* kHealth = "health";

    InheritedSockets() = default;
    ~InheritedSockets();  // closes what nobody took
    InheritedSockets(InheritedSockets&& other) noexcept;
    InheritedSockets& operator=(InheritedSockets&& other) noexcept;
    InheritedSockets(const InheritedSockets&) = delete;
    InheritedSockets& operator=(const InheritedSockets&) = delete;

    // The sd_listen_fds(3) protocol from the environment: nothing when LISTEN_PID is unset or
    // names another process (the variables were meant for a parent). The variables are unset
    // (as sd_listen_fds(unset=1): a child we start must not take them for its own) and each
    // descriptor gets FD_CLOEXEC. An error (a count or name list that does not parse, an
    // unknown name, a descriptor of the wrong kind) is a configuration error: exit 2.
    static Result<InheritedSockets> from_environment();
    // The same from the variables' values (null: unset), for `self` and descriptors from
    // `first_fd`; does not touch the environment or validate (unit tests pass any numbers).
    static Result<InheritedSockets> parse(const char* listen_pid, const char* listen_fds,
                                          const char* listen_fdnames, pid_t self, int first_fd = 3);

    // Checks every descriptor against its name's kind (see above); says which one is wrong
    // ("descriptor N (NAME) is not ...").
    Result<void> validate() const;
    // The same check of one descriptor.
    static Result<void> validate_one(std::string_view name, int fd);

    // Takes ownership of `fd` under `name` (the takeover fills the registry this way).
    void add(std::string name, int fd);
    // The descriptors under `name`, in the order given; the caller owns them from now on.
    std::vector<int> take(std::string_view name);
    // The one descriptor under `name`, if any (the caller owns it).
    std::optional<int> take_one(std::string_view name);
    bool has(std::string_view name) const;
    bool empty() const { return sockets_.empty(); }
    size_t size() const { return sockets_.size(); }
    const std::vector<std::pair<std::string, int>>& entries() const { return sockets_; }
    // Closes every descriptor still held.
    void close_all();

  private:
    std::vector<std::pair<std::string, int>> sockets_;  // (name, fd) in the order given
};

}  // namespace nscache
