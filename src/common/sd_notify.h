// SPDX-License-Identifier: BSD-3-Clause
// The systemd readiness protocol (sd_notify(3)) without libsystemd: one datagram to the unix
// socket named by $NOTIFY_SOCKET. With Type=notify the unit is "started" (and
// nss-lookup.target reached) only once the daemon says READY=1, after its sockets are bound
// and its cache file is loaded. Without $NOTIFY_SOCKET every call does nothing.
// Thread-safe (one sendto per call).
#pragma once

namespace nscache {

// Sends `state` ("READY=1", "STOPPING=1", "STATUS=..."). False if it could not be sent.
bool sd_notify(const char* state);

}  // namespace nscache
