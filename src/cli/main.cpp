// SPDX-License-Identifier: BSD-3-Clause
// nscache: one binary, one subcommand per job. This file only dispatches.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "version.h"

namespace {

struct Command {
    const char* name;
    const char* synopsis;  // after "nscache "
    const char* summary;
    int (*run)(const nscache::Args&);
};

constexpr Command kCommands[] = {
    {"serve",
     "serve [--config FILE] [--listen ADDR:PORT]... [--upstream "
     "ADDR[:PORT]|tls://ADDR[:PORT][#NAME]|https://ADDR[:PORT][/PATH][#NAME]]...\n"
     "        [--threads N] [--cache-size SIZE] [--control PATH] [--user NAME]\n"
     "        [--nss-socket PATH] [--nscd-socket PATH] [--verbose] [--takeover]",
     "run the caching DNS daemon in the foreground", nscache::serve_command},
    {"query", "query [--server ADDR:PORT] [--tcp] NAME [TYPE]",
     "ask the daemon and print the answer", nscache::query_command},
    {"stats", "stats [--control PATH] [--json]", "show counters", nscache::stats_command},
    {"flush", "flush [--control PATH] [NAME]", "empty the cache, or drop one name",
     nscache::flush_command},
    {"reload", "reload [--control PATH]", "re-read the configuration (as SIGHUP does)",
     nscache::reload_command},
    {"dump", "dump [--control PATH] FILE", "write the cache to FILE (inside state-dir)",
     nscache::dump_command},
    {"load", "load [--control PATH] FILE", "read cache entries from FILE (inside state-dir)",
     nscache::load_command},
    {"check-config", "check-config FILE", "check a configuration file",
     nscache::check_config_command},
    {"invalidate", "invalidate [--nscd-socket PATH] [--config FILE] passwd|group|services|hosts",
     "flush passwd, group, services or hosts from the nscd maps (as nscd -i; root only)",
     nscache::invalidate_command},
};

void print_usage(FILE* to) {
    std::fputs("usage: nscache <command> [options]\n\n", to);
    for (const Command& c : kCommands) {
        // The summary goes in a column of its own, or below a synopsis too long for it.
        const size_t width = std::strlen(c.synopsis);
        if (width <= 32 && std::strchr(c.synopsis, '\n') == nullptr) {
            std::fprintf(to, "  %-32s %s\n", c.synopsis, c.summary);
        } else {
            std::fprintf(to, "  %s\n  %32s %s\n", c.synopsis, "", c.summary);
        }
    }
    std::fprintf(to, "  %-32s %s\n", "--version", "print the version");
}

// `nscache CMD --help` (or -h) anywhere after the command: that command's usage, whatever
// else is on the line, rather than a complaint about it.
bool wants_help(const nscache::Args& args) {
    return std::any_of(args.begin(), args.end(),
                       [](const std::string& a) { return a == "--help" || a == "-h"; });
}

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        print_usage(stderr);
        return nscache::kExitUsage;
    }
    const std::string command = argv[1];
    const nscache::Args args(argv + 2, argv + argc);
    if (command == "--version" || command == "version") {
        std::printf("nscache %s\n", NSCACHE_VERSION);
        return nscache::kExitOk;
    }
    if (command == "--help" || command == "-h" || command == "help") {
        print_usage(stdout);
        return nscache::kExitOk;
    }
    for (const Command& c : kCommands) {
        if (command != c.name) continue;
        if (wants_help(args)) {
            std::printf("usage: nscache %s\n\n  %s\n", c.synopsis, c.summary);
            return nscache::kExitOk;
        }
        return c.run(args);
    }
    std::fprintf(stderr, "nscache: unknown command '%s'\n\n", command.c_str());
    print_usage(stderr);
    return nscache::kExitUsage;
}
