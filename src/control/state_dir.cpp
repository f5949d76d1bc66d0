// SPDX-License-Identifier: BSD-3-Clause
#include "control/state_dir.h"

#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>

namespace nscache::control {
namespace {

std::optional<std::string> real_path(const std::string& path) {
    std::unique_ptr<char, decltype(&std::free)> resolved(realpath(path.c_str(), nullptr),
                                                         &std::free);
    if (!resolved) return std::nullopt;
    return std::string(resolved.get());
}

bool is_inside(const std::string& folder, const std::string& root) {
    if (root == "/" || folder == root) return true;
    return folder.size() > root.size() && folder.compare(0, root.size(), root) == 0 &&
           folder[root.size()] == '/';
}

}  // namespace

std::optional<std::string> resolve_state_path(const std::string& state_dir, const std::string& name,
                                              std::string& error) {
    const auto root = real_path(state_dir);
    if (!root) {
        error = "state-dir " + state_dir + ": " + std::strerror(errno);
        return std::nullopt;
    }
    const std::string full = !name.empty() && name[0] == '/' ? name : *root + "/" + name;
    const size_t slash = full.rfind('/');
    const std::string last = full.substr(slash + 1);
    if (last.empty() || last == "." || last == "..") {
        error = "'" + name + "' does not name a file";
        return std::nullopt;
    }
    const std::string folder_part = slash == 0 ? "/" : full.substr(0, slash);
    const auto folder = real_path(folder_part);
    if (!folder) {
        error = "the folder of " + name + ": " + std::strerror(errno);
        return std::nullopt;
    }
    if (!is_inside(*folder, *root)) {
        error = name + " is outside the state folder " + *root + " (state-dir)";
        return std::nullopt;
    }
    return (*folder == "/" ? "" : *folder) + "/" + last;
}

}  // namespace nscache::control
