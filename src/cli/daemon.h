// SPDX-License-Identifier: BSD-3-Clause
// The composition root of `nscache serve`: builds the cache, the forwarding state, the
// workers and the control server from a Config, runs until SIGTERM or SIGINT, then shuts
// down in order (control, workers, cache file).
#pragma once

#include "cli/config_source.h"
#include "config/config.h"

namespace nscache {

// Returns the process exit code: 0 after a clean shutdown, 1 when start-up failed.
// `config` is what `source` gave at start; a reload (SIGHUP, `nscache reload`) reads
// `source` again.
int run_daemon(const ConfigSource& source, const Config& config);

}  // namespace nscache
