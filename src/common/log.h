// Logging to stderr, one line per event, in a form both humans and journald read:
// "info: message" on a terminal, "<6>message" when stderr is a journald stream
// (JOURNAL_STREAM set), so journald files each line at its priority.
// Thread-safe: each line is a single write(2).
//
// A line that a fault can repeat on every loop turn (accept failing with EMFILE) goes through
// NSCACHE_LOG_LIMITED: at most one line a second from that call site, and the next line that
// gets through says how many were held back.
#pragma once

#include <atomic>
#include <cstdint>

namespace nscache {

enum class LogLevel { Error = 3, Warning = 4, Info = 6, Debug = 7 };

void set_log_verbose(bool verbose);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

#define NSCACHE_LOG(level, ...) ::nscache::log_message(::nscache::LogLevel::level, __VA_ARGS__)
#define log_error(...) NSCACHE_LOG(Error, __VA_ARGS__)
#define log_warning(...) NSCACHE_LOG(Warning, __VA_ARGS__)
#define log_info(...) NSCACHE_LOG(Info, __VA_ARGS__)
#define log_debug(...) NSCACHE_LOG(Debug, __VA_ARGS__)

// One call site's budget of one line a second. Any thread may use it.
class LogLimiter {
  public:
    static constexpr uint64_t kIntervalMs = 1000;

    // True when a line may go out at `now_ms`; `suppressed` is then the count of lines held
    // back since the last one that went out.
    bool allow(uint64_t now_ms, uint64_t& suppressed);

  private:
    std::atomic<uint64_t> next_ms_{0};
    std::atomic<uint64_t> suppressed_{0};
};

void log_limited(LogLimiter& limiter, LogLevel level, const char* format, ...)
    __attribute__((format(printf, 3, 4)));

#define NSCACHE_LOG_LIMITED(level, ...)                                                        \
    do {                                                                                       \
        static ::nscache::LogLimiter nscache_log_limiter_;                                     \
        ::nscache::log_limited(nscache_log_limiter_, ::nscache::LogLevel::level, __VA_ARGS__); \
    } while (0)
#define log_warning_limited(...) NSCACHE_LOG_LIMITED(Warning, __VA_ARGS__)
#define log_error_limited(...) NSCACHE_LOG_LIMITED(Error, __VA_ARGS__)

}  // namespace nscache
