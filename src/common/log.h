// Logging to stderr, one line per event, in a form both humans and journald read:
// "info: message" on a terminal, "<6>message" when stderr is a journald stream
// (JOURNAL_STREAM set), so journald files each line at its priority.
// Thread-safe: each line is a single write(2).
#pragma once

namespace nscache {

enum class LogLevel { Error = 3, Warning = 4, Info = 6, Debug = 7 };

void set_log_verbose(bool verbose);

void log_message(LogLevel level, const char* format, ...) __attribute__((format(printf, 2, 3)));

#define NSCACHE_LOG(level, ...) ::nscache::log_message(::nscache::LogLevel::level, __VA_ARGS__)
#define log_error(...) NSCACHE_LOG(Error, __VA_ARGS__)
#define log_warning(...) NSCACHE_LOG(Warning, __VA_ARGS__)
#define log_info(...) NSCACHE_LOG(Info, __VA_ARGS__)
#define log_debug(...) NSCACHE_LOG(Debug, __VA_ARGS__)

}  // namespace nscache
