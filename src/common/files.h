// SPDX-License-Identifier: BSD-3-Clause
// Small file-system helpers for the daemon's runtime files and the small text files it reads
// (config, resolv.conf). Any thread may call them; none keeps state.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

namespace nscache {

// Creates the folder that will hold `path` (mode 0755), with its parents. False on failure
// (errno set).
bool make_parent_folder(const std::string& path);

// "/run/nscache/x.sock" -> "/run/nscache"; "x" -> ".".
std::string parent_folder(const std::string& path);

// The whole of a small regular file, or nullopt with `error` set ("not a regular file (a
// FIFO)", "larger than 1048576 bytes", strerror's text) and errno kept (ENOENT for a missing
// file). Never blocks on what the path names: a FIFO (which would wait for a writer, on the
// thread that also reads SIGTERM), a device (/dev/zero never ends) or a socket is refused
// before a byte is read. Symlinks are followed (/etc/resolv.conf is commonly one); the file
// they end at is what must be regular.
std::optional<std::string> read_small_file(const std::string& path, size_t max_bytes,
                                           std::string& error);

}  // namespace nscache
