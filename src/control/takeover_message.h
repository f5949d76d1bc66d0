// SPDX-License-Identifier: BSD-3-Clause
// The message `nscache serve --takeover` receives from the running instance: named
// descriptors (listening sockets, runtime-lock files, a memfd holding the cache) passed with
// SCM_RIGHTS over the control socket, one name per descriptor, in the same order.
//
// Wire layout (little-endian), sent with one sendmsg():
//   "NSCTAKE1"  u32 body_length  body
//   body: u16 count, then `count` times: u8 name_length, name bytes
// The SCM_RIGHTS control message carries exactly `count` descriptors.
//
// Guarantees:
// - decode() trusts no length: a count above kMaxTakeoverFds, a name that is empty, longer
//   than kMaxTakeoverName or outside [A-Za-z0-9 ._:/@-], a body that is short or has bytes
//   left over, or a count that differs from the descriptors received is an error.
// - receive_takeover() never leaks a descriptor: on any error every one received is closed;
//   a truncated control message (MSG_CTRUNC) is an error. Descriptors arrive close-on-exec.
// Any thread; each call works on the socket it is given only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace nscache::control {

inline constexpr size_t kMaxTakeoverFds = 200;  // below the kernel's SCM_MAX_FD (253)
inline constexpr size_t kMaxTakeoverName = 200;
inline constexpr char kTakeoverMagic[8] = {'N', 'S', 'C', 'T', 'A', 'K', 'E', '1'};
inline constexpr size_t kTakeoverHeader = sizeof kTakeoverMagic + 4;
// The refusal of an instance whose drain has begun: it exits soon, and never sent an offer.
inline constexpr const char* kStoppingRefusal = "this instance is stopping";
// receive_takeover()'s error when the connection ended (EOF or reset) before any answer: the
// running instance exited, or died, before it sent its offer.
inline constexpr const char* kClosedBeforeOffer = "the running instance closed the connection";

struct NamedFd {
    std::string name;
    int fd = -1;
};

// The bytes for `names` (header included), or an error if one breaks the bounds above.
Result<std::vector<uint8_t>> encode_takeover_names(const std::vector<std::string>& names);
// The body's length from a header (magic checked), or an error.
Result<size_t> takeover_body_length(std::span<const uint8_t> header);
// The names in a body that came with `fds_received` descriptors.
Result<std::vector<std::string>> decode_takeover_body(std::span<const uint8_t> body,
                                                      size_t fds_received);

// Sends the names and their descriptors (which stay the caller's to close). The socket may
// be non-blocking: a message that does not go out whole at once is an error.
Result<void> send_takeover(int socket_fd, const std::vector<NamedFd>& fds);

// Reads one message from a blocking socket whose receive timeout bounds the wait. A line
// starting with "error:" instead of the magic is returned as that error.
Result<std::vector<NamedFd>> receive_takeover(int socket_fd);

// Closes every descriptor in `fds` and empties it.
void close_all(std::vector<NamedFd>& fds);

}  // namespace nscache::control
