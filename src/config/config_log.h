// SPDX-License-Identifier: BSD-3-Clause
// The log lines for configuration events, so that start-up and a reload say the same thing
// the same way: a refused file with its reason (FILE:LINE), and what a change applied or
// could not apply. Any thread.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"

namespace nscache {

enum class ConfigEvent { Start, Reload };

// "error: config refused: FILE:LINE: reason" (at start the daemon then exits 2; on reload it
// adds "; keeping the running configuration").
void log_config_refused(const ConfigError& error, ConfigEvent when);

// "info: config FILE reloaded: changed a, b" and, for each option that only a restart
// applies, "warning: config FILE: x changed but needs a restart; still using the old value".
void log_config_reloaded(const std::string& path, const std::vector<std::string>& applied,
                         const std::vector<std::string>& need_restart);

}  // namespace nscache
