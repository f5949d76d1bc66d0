// SPDX-License-Identifier: BSD-3-Clause
#include "config/config_source.h"

namespace nscache {

std::optional<ConfigError> ConfigSource::load(Config& out) const {
    Config config;
    if (!path.empty()) {
        if (auto error = load_config_file(path, config)) return error;
    }
    for (const auto& apply : overrides) apply(config);
    if (auto error = resolve_defaults(config, resolv_conf)) return error;
    out = std::move(config);
    return std::nullopt;
}

}  // namespace nscache
