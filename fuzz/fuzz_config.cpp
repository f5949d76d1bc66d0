// SPDX-License-Identifier: BSD-3-Clause
// libFuzzer target: the TOML configuration parser and every option's checks.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    nscache::Config config;
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    auto error = nscache::load_config_text(text, "fuzz.toml", config);
    if (error && error->message.empty()) __builtin_trap();  // every error must say something
    return 0;
}
