// SPDX-License-Identifier: BSD-3-Clause
// Where `nscache dump|load FILE` may read and write: the state folder (`state-dir`). A user of
// the control socket names the file and the daemon, root more often than not, opens it, so
// nothing outside that folder may be named. Any thread; the file system is read at each call.
#pragma once

#include <optional>
#include <string>

namespace nscache::control {

// The path to open for `name`: a relative name is taken inside `state_dir`, an absolute one
// must lie inside it. The state folder and the folder part of the path are resolved by
// realpath (links there are the administrator's); the last component is kept as given and
// never resolved (dump replaces a link there, load refuses it). nullopt with `error` set when
// the path is outside the folder, or a folder on the way does not exist.
std::optional<std::string> resolve_state_path(const std::string& state_dir, const std::string& name,
                                              std::string& error);

}  // namespace nscache::control
