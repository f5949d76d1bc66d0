// SPDX-License-Identifier: BSD-3-Clause
#include "cli/flag_parser.h"

namespace nscache {

bool FlagParser::next() {
    if (index_ >= args_.size()) return false;
    current_ = args_[index_++];
    return true;
}

std::string FlagParser::name() const {
    const std::string body = current_.substr(2);
    return body.substr(0, body.find('='));
}

std::optional<std::string> FlagParser::value() {
    if (const size_t eq = current_.find('='); eq != std::string::npos)
        return current_.substr(eq + 1);
    if (index_ >= args_.size()) {
        error_ = "--" + name() + " needs a value";
        return std::nullopt;
    }
    return args_[index_++];
}

}  // namespace nscache
