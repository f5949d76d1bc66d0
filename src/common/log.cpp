// SPDX-License-Identifier: BSD-3-Clause
#include "common/log.h"

#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>

#include "common/clock.h"

namespace nscache {
namespace {

std::atomic<int> threshold{static_cast<int>(LogLevel::Info)};

bool dropped(LogLevel level) {
    return static_cast<int>(level) > threshold.load(std::memory_order_relaxed);
}

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

// Formats and writes one line; `held_back` > 0 appends how many lines were suppressed.
__attribute__((format(printf, 3, 0))) void write_line(LogLevel level, uint64_t held_back,
                                                      const char* format, va_list args) {
    char line[1024];
    int n = to_journald() ? std::snprintf(line, sizeof line, "<%d>", static_cast<int>(level))
                          : std::snprintf(line, sizeof line, "%s: ", level_name(level));
    const int body =
        std::vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
    n += body < 0 ? 0 : body;
    if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
    if (held_back > 0) {
        const int more = std::snprintf(line + n, sizeof line - static_cast<size_t>(n) - 1,
                                       " (%llu similar lines suppressed)",
                                       static_cast<unsigned long long>(held_back));
        n += more < 0 ? 0 : more;
        if (n > static_cast<int>(sizeof line) - 2) n = static_cast<int>(sizeof line) - 2;
    }
    line[n++] = '\n';
    // One write per line keeps lines from different threads whole.
    ssize_t ignored = write(STDERR_FILENO, line, static_cast<size_t>(n));
    (void)ignored;
}

}  // namespace

bool LogLimiter::allow(uint64_t now_ms, uint64_t& held_back) {
    uint64_t next = next_ms_.load(std::memory_order_relaxed);
    // One thread wins the second; the others count as held back.
    if (now_ms < next ||
        !next_ms_.compare_exchange_strong(next, now_ms + 1000, std::memory_order_relaxed)) {
        held_back_.fetch_add(1, std::memory_order_relaxed);
        return false;
    }
    held_back = held_back_.exchange(0, std::memory_order_relaxed);
    return true;
}

void set_log_verbose(bool on) {
    set_log_threshold(on ? LogLevel::Debug : LogLevel::Info);
}

void set_log_threshold(LogLevel level) {
    threshold.store(static_cast<int>(level), std::memory_order_relaxed);
}

void log_message(LogLevel level, const char* format, ...) {
    if (dropped(level)) return;
    va_list args;
    va_start(args, format);
    write_line(level, 0, format, args);
    va_end(args);
}

void log_message_limited(LogLimiter& limiter, LogLevel level, const char* format, ...) {
    if (dropped(level)) return;
    uint64_t held_back = 0;
    if (!limiter.allow(monotonic_ms(), held_back)) return;
    va_list args;
    va_start(args, format);
    write_line(level, held_back, format, args);
    va_end(args);
}

}  // namespace nscache
