// SPDX-License-Identifier: BSD-3-Clause
#include "config/config_log.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>

namespace nscache {
namespace {

// The lines as an operator's log shows them, with the level as a word ("error: "); under
// journald (JOURNAL_STREAM set) the log writes "<3>" instead, turned back into the word here.
std::string logged(const std::function<void()>& fn) {
    ::testing::internal::CaptureStderr();
    fn();
    std::string text = ::testing::internal::GetCapturedStderr();
    if (std::getenv("JOURNAL_STREAM") == nullptr) return text;
    const std::pair<const char*, const char*> levels[] = {
        {"<3>", "error: "}, {"<4>", "warning: "}, {"<6>", "info: "}};
    std::string out;
    size_t start = 0;
    while (start < text.size()) {
        size_t end = text.find('\n', start);
        end = end == std::string::npos ? text.size() : end + 1;
        std::string line = text.substr(start, end - start);
        for (const auto& [code, word] : levels) {
            if (line.rfind(code, 0) == 0) line = word + line.substr(3);
        }
        out += line;
        start = end;
    }
    return out;
}

TEST(ConfigLog, RefusedAtStartNamesFileLineAndReason) {
    const std::string line = logged([] {
        log_config_refused(ConfigError{"/etc/nscache/nscache.toml:3: bad cache-size 'lots'"},
                           ConfigEvent::Start);
    });
    EXPECT_EQ(line, "error: config refused: /etc/nscache/nscache.toml:3: bad cache-size 'lots'\n");
}

TEST(ConfigLog, RefusedOnReloadSaysTheRunningConfigurationStays) {
    const std::string line = logged(
        [] { log_config_refused(ConfigError{"f.toml:1: unknown key 'x'"}, ConfigEvent::Reload); });
    EXPECT_EQ(line,
              "error: config refused: f.toml:1: unknown key 'x'; keeping the running "
              "configuration\n");
}

TEST(ConfigLog, ReloadedListsWhatChangedAndWhatNeedsARestart) {
    EXPECT_EQ(logged([] {
                  log_config_reloaded("f.toml", {"upstream", "allow"}, {"threads"});
              }),
              "info: config f.toml reloaded: changed upstream, allow\n"
              "warning: config f.toml: threads changed but needs a restart; still using the old "
              "value\n");
    EXPECT_EQ(logged([] { log_config_reloaded("f.toml", {}, {}); }),
              "info: config f.toml reloaded: nothing changed\n");
}

}  // namespace
}  // namespace nscache
