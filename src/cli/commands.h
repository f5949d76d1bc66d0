// SPDX-License-Identifier: BSD-3-Clause
// The subcommands of the `nscache` binary. Each takes the arguments after its name and
// returns the exit code: 0 success, 1 runtime failure, 2 usage or configuration error.
#pragma once

#include <string>
#include <vector>

namespace nscache {

using Args = std::vector<std::string>;

int serve_command(const Args& args);
int query_command(const Args& args);
int stats_command(const Args& args);
int flush_command(const Args& args);
int reload_command(const Args& args);
int dump_command(const Args& args);
int load_command(const Args& args);
int check_config_command(const Args& args);
// nscd -i: sends INVALIDATE on the nscd socket (invalidate_command.cpp).
int invalidate_command(const Args& args);

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

}  // namespace nscache
