#include "common/log.h"

#include "common/clock.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

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

}  // namespace

bool LogRateLimit::allow(uint64_t& suppressed) {
    const uint64_t now = monotonic_ms();
    uint64_t next = next_ms_.load(std::memory_order_relaxed);
    if (now < next || !next_ms_.compare_exchange_strong(next, now + 1000)) {
        suppressed_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    suppressed = suppressed_.exchange(0, std::memory_order_relaxed);
    return true;
}

void set_log_verbose(bool on) {
    verbose.store(on, std::memory_order_relaxed);
}

void log_message(LogLevel level, const char* format, ...) {
    if (level == LogLevel::Debug && !verbose.load(std::memory_order_relaxed)) return;
    char line[1024];
    int n = to_journald() ? std::snprintf(line, sizeof line, "<%d>", static_cast<int>(level))
                          : std::snprintf(line, sizeof line, "%s: ", level_name(level));
    va_list args;
    va_start(args, format);
    const int body =
        std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
    va_end(args);
    n += body < 0 ? 0 : body;
    if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
    line[n++] = '\n';
    // One write per line keeps lines from different threads whole.
    ssize_t ignored = write(STDERR_FILENO, line, static_cast<size_t>(n));
    (void)ignored;
}

}  // namespace nscache
