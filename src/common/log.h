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

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

#define NSCACHE_LOG(level, ...) ::nscache::log_message(::nscache::LogLevel::level, __VA_ARGS__)

// At most one line a second from one call site: a condition that repeats every loop turn (a
// failing accept) must neither flood the journal nor block the loop on a full log pipe.
class LogRateLimit {
  public:
    // True when a line may go out now; `suppressed` is how many were held back before it.
    bool allow(uint64_t& suppressed);

  private:
    std::atomic<uint64_t> next_ms_{0};
    std::atomic<uint64_t> suppressed_{0};
};

#define NSCACHE_LOG_LIMITED(level, ...)                                            \
    do {                                                                           \
        static ::nscache::LogRateLimit nscache_limit_;                             \
        uint64_t nscache_suppressed_ = 0;                                          \
        if (nscache_limit_.allow(nscache_suppressed_)) {                           \
            NSCACHE_LOG(level, __VA_ARGS__);                                       \
            if (nscache_suppressed_ != 0) {                                        \
                NSCACHE_LOG(level, "(%llu similar messages suppressed)",           \
                            static_cast<unsigned long long>(nscache_suppressed_)); \
            }                                                                      \
        }                                                                          \
    } while (0)
#define log_warning_limited(...) NSCACHE_LOG_LIMITED(Warning, __VA_ARGS__)
#define log_error_limited(...) NSCACHE_LOG_LIMITED(Error, __VA_ARGS__)
#define log_error(...) NSCACHE_LOG(Error, __VA_ARGS__)
#define log_warning(...) NSCACHE_LOG(Warning, __VA_ARGS__)
#define log_info(...) NSCACHE_LOG(Info, __VA_ARGS__)
#define log_debug(...) NSCACHE_LOG(Debug, __VA_ARGS__)

}  // namespace nscache
