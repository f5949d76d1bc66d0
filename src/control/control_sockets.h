// SPDX-License-Identifier: BSD-3-Clause
// Binding the control socket and the HTTP endpoints (metrics, health), before privileges are
// dropped. The control socket's folder may belong to someone else, so nothing here that runs as
// root follows a link by path: the mode comes from the umask at bind, the owner from lchown.
// Start-up thread only (the umask is process-wide).
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

#include "config/address.h"

namespace nscache::control {

// A listening unix socket at `path`, mode 0600 (0660 with a group), owned by `owner_uid` (and
// the group). A socket file left by a daemon that died is replaced; one that still answers is
// an error. Returns the descriptor (non-blocking) or the error message in `error`.
int bind_control_socket(const std::string& path, uid_t owner_uid, std::optional<gid_t> group,
                        std::string& error);

// A listening TCP socket for an HTTP endpoint (non-blocking), or -1 with `error` set; `what`
// ("metrics", "health") names it in the message.
int bind_http_socket(const SocketAddress& address, const char* what, std::string& error);

}  // namespace nscache::control
