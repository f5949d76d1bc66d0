// SPDX-License-Identifier: BSD-3-Clause
// Logging to stderr, one line per event, in a form both humans and journald read:
// "info: message" on a terminal, "<6>message" when stderr is a journald stream
// (JOURNAL_STREAM set), so journald files each line at its priority.
// Thread-safe: each line is a single write(2).
#pragma once

#include <atomic>
#include <cstdint>

namespace nscache {

enum class LogLevel { Error = 3, Warning = 4, Info = 6, Debug = 7 };

void set_log_verbose(bool verbose);
// Lines above `level` (less severe) are dropped; Info by default, Debug with --verbose.
void set_log_threshold(LogLevel level);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

// Holds one call site to one line a second: a fault that repeats per event (running out of
// descriptors, a full queue) must not flood the log or cost a write per event. Thread-safe.
class LogLimiter {
  public:
    // True when a line may go out at now_ms; `held_back` is then how many were refused since
    // the last line that went out.
    bool allow(uint64_t now_ms, uint64_t& held_back);

  private:
    std::atomic<uint64_t> next_ms_{0};
    std::atomic<uint64_t> held_back_{0};
};

// log_message through `limiter`; a line that goes out says how many were held back before it.
void log_message_limited(LogLimiter& limiter, LogLevel level, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

#define NSCACHE_LOG(level, ...) ::nscache::log_message(::nscache::LogLevel::level, __VA_ARGS__)
#define log_error(...) NSCACHE_LOG(Error, __VA_ARGS__)
#define log_warning(...) NSCACHE_LOG(Warning, __VA_ARGS__)
#define log_info(...) NSCACHE_LOG(Info, __VA_ARGS__)
#define log_debug(...) NSCACHE_LOG(Debug, __VA_ARGS__)

// At most one line a second from each place these are written, with the count suppressed.
#define NSCACHE_LOG_LIMITED(level, ...)                                                  \
    do {                                                                                 \
        static ::nscache::LogLimiter nscache_log_limiter_;                               \
        ::nscache::log_message_limited(nscache_log_limiter_, ::nscache::LogLevel::level, \
                                       __VA_ARGS__);                                     \
    } while (0)
#define log_warning_limited(...) NSCACHE_LOG_LIMITED(Warning, __VA_ARGS__)
#define log_error_limited(...) NSCACHE_LOG_LIMITED(Error, __VA_ARGS__)

}  // namespace nscache
