// SPDX-License-Identifier: BSD-3-Clause
// A small parser for "--name value", "--name=value" and bare flags, shared by the
// subcommands. Errors are messages for the user (the command exits 2).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace nscache {

class FlagParser {
  public:
    explicit FlagParser(const std::vector<std::string>& args) : args_(args) {}

    // Moves to the next argument. False at the end.
    bool next();
    bool is_flag() const { return current_.size() > 2 && current_.rfind("--", 0) == 0; }
    // The flag's name without dashes ("listen"), when is_flag().
    std::string name() const;
    // The flag's value: after '=' or the following argument. nullopt (error set) if missing.
    std::optional<std::string> value();
    const std::string& current() const { return current_; }
    const std::string& error() const { return error_; }

  private:
    const std::vector<std::string>& args_;
    size_t index_ = 0;
    std::string current_;
    std::string error_;
};

}  // namespace nscache
