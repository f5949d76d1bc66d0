// SPDX-License-Identifier: BSD-3-Clause
// The client side of the control socket, for `nscache stats|flush|dump|load`.
#pragma once

#include <optional>
#include <string>

namespace nscache::control {

struct ControlReply {
    bool ok = false;   // the daemon answered "ok"
    std::string body;  // the text after the status line, or the daemon's error
};

// nullopt with `error` set when the daemon cannot be reached.
std::optional<ControlReply> control_request(const std::string& socket_path,
                                            const std::string& request, std::string& error);

}  // namespace nscache::control
