// SPDX-License-Identifier: BSD-3-Clause
// `nscache serve` once its Config is read: the daemon's start-up steps (daemon/daemon.h) in
// order, each failure logged with its exit code, then the run until SIGTERM or SIGINT and
// the shutdown. Main thread.
#pragma once

#include "config/config.h"
#include "config/config_source.h"

namespace nscache {

// Returns the process exit code: 0 after a clean shutdown, 1 when start-up failed, 2 for a
// TLS setting that cannot be used.
// `config` is what `source` gave at start; a reload (SIGHUP, `nscache reload`) reads
// `source` again. `takeover` (serve --takeover): take the sockets and cache of the instance
// running on the same control socket first, then tell it to drain (daemon/takeover.h).
int run_daemon(const ConfigSource& source, const Config& config, bool takeover = false);

}  // namespace nscache
