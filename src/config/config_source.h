// SPDX-License-Identifier: BSD-3-Clause
// Where the daemon's settings come from, kept so a reload can read them again the same way:
// the TOML file (if any), then the command-line flags over it, then the machine's defaults
// (listen addresses, thread count, upstreams from resolv.conf). Main thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace nscache {

struct ConfigSource {
    std::string path;  // the config file; empty: none
    std::string resolv_conf = "/etc/resolv.conf";
    // The flags given, each setting its field over the file's value.
    std::vector<std::function<void(Config&)>> overrides;

    // A complete Config, or the first error (FILE:LINE: ... for the file).
    std::optional<ConfigError> load(Config& out) const;
};

}  // namespace nscache
