#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "common/clock.h"

namespace nscache {
namespace {

std::atomic<bool> verbose{false};

bool to_journald() {
    static const bool journald = std::getenv("JOURNAL_STREAM") != nullptr;
    return journald;
}

const char* level_name(LogLevel level) {
    switch (level) {
        case LogLevel::Error:
            return "error";
        case LogLevel::Warning:
            return "warning";
        case LogLevel::Info:
            return "info";
        case LogLevel::Debug:
            return "debug";
    }
    return "info";
}

void write_line(LogLevel level, const char* format, va_list args, const char* suffix) {
    char line[1024];
    int n = to_journald() ? std::snprintf(line, sizeof line, "<%d>", static_cast<int>(level))
                          : std::snprintf(line, sizeof line, "%s: ", level_name(level));
    const int body =
        std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
    n += body < 0 ? 0 : body;
    if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
    if (suffix != nullptr) {
        const int extra =
            std::snprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, "%s", suffix);
        n += extra < 0 ? 0 : extra;
        if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
    }
    line[n++] = '\n';
    // One write per line keeps lines from different threads whole.
    ssize_t ignored = write(STDERR_FILENO, line, static_cast<size_t>(n));
    (void)ignored;
}

bool debug_hidden(LogLevel level) {
    return level == LogLevel::Debug && !verbose.load(std::memory_order_relaxed);
}

}  // namespace

void set_log_verbose(bool on) {
    verbose.store(on, std::memory_order_relaxed);
}

void log_message(LogLevel level, const char* format, ...) {
    if (debug_hidden(level)) return;
    va_list args;
    va_start(args, format);
    write_line(level, format, args, nullptr);
    va_end(args);
}

bool LogLimiter::allow(uint64_t now_ms, uint64_t& suppressed) {
    uint64_t next = next_ms_.load(std::memory_order_relaxed);
    // One thread wins the slot; the others count themselves as held back.
    if (now_ms < next ||
        !next_ms_.compare_exchange_strong(next, now_ms + kIntervalMs, std::memory_order_relaxed)) {
        suppressed_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
}

void log_limited(LogLimiter& limiter, LogLevel level, const char* format, ...) {
    if (debug_hidden(level)) return;
    uint64_t suppressed = 0;
    if (!limiter.allow(monotonic_ms(), suppressed)) return;
    const std::string suffix =
        suppressed == 0 ? "" : " (" + std::to_string(suppressed) + " similar lines suppressed)";
    va_list args;
    va_start(args, format);
    write_line(level, format, args, suffix.empty() ? nullptr : suffix.c_str());
    va_end(args);
}

}  // namespace nscache
