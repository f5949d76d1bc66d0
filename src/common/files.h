// Small file-system helpers for the daemon's runtime files.
#pragma once

#include <string>

namespace nscache {

// Creates the folder that will hold `path` (mode 0755), with its parents. False on failure
// (errno set).
bool make_parent_folder(const std::string& path);

// "/run/nscache/x.sock" -> "/run/nscache"; "x" -> ".".
std::string parent_folder(const std::string& path);

}  // namespace nscache
