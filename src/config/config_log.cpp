// SPDX-License-Identifier: BSD-3-Clause
#include "config/config_log.h"

#include "common/log.h"

namespace nscache {

void log_config_refused(const ConfigError& error, ConfigEvent when) {
    if (when == ConfigEvent::Start) {
        log_error("config refused: %s", error.message.c_str());
    } else {
        log_error("config refused: %s; keeping the running configuration", error.message.c_str());
    }
}

void log_config_reloaded(const std::string& path, const std::vector<std::string>& applied,
                         const std::vector<std::string>& need_restart) {
    std::string list;
    for (const auto& name : applied) list += (list.empty() ? "" : ", ") + name;
    log_info("config %s reloaded: %s", path.c_str(),
             list.empty() ? "nothing changed" : ("changed " + list).c_str());
    for (const auto& name : need_restart) {
        log_warning("config %s: %s changed but needs a restart; still using the old value",
                    path.c_str(), name.c_str());
    }
}

}  // namespace nscache
