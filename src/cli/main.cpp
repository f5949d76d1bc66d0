// nscache: one binary, one subcommand per job. This file only dispatches.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "version.h"

namespace {

constexpr const char* kUsage =
    "usage: nscache <command> [options]\n"
    "\n"
    "  serve [--config FILE] [--listen ADDR:PORT]... [--upstream ADDR[:PORT]]...\n"
    "        [--threads N] [--cache-size SIZE] [--control PATH] [--user NAME]\n"
    "        [--nss-socket PATH] [--verbose]\n"
    "                                   run the caching DNS daemon in the foreground\n"
    "  query [--server ADDR:PORT] [--tcp] NAME [TYPE]\n"
    "                                   ask the daemon and print the answer\n"
    "  stats [--control PATH] [--json]  show counters\n"
    "  flush [--control PATH] [NAME]    empty the cache, or drop one name\n"
    "  reload [--control PATH]          re-read the configuration (as SIGHUP does)\n"
    "  dump [--control PATH] FILE       write the cache to FILE (inside state-dir)\n"
    "  load [--control PATH] FILE       read cache entries from FILE (inside state-dir)\n"
    "  check-config FILE                check a configuration file\n"
    "  --version                        print the version\n";

}  // namespace

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fputs(kUsage, stderr);
        return nscache::kExitUsage;
    }
    const std::string command = argv[1];
    const nscache::Args args(argv + 2, argv + argc);
    if (command == "--version" || command == "version") {
        std::printf("nscache %s\n", NSCACHE_VERSION);
        return nscache::kExitOk;
    }
    if (command == "--help" || command == "-h" || command == "help") {
        std::fputs(kUsage, stdout);
        return nscache::kExitOk;
    }
    if (command == "serve") return nscache::serve_command(args);
    if (command == "query") return nscache::query_command(args);
    if (command == "stats") return nscache::stats_command(args);
    if (command == "flush") return nscache::flush_command(args);
    if (command == "reload") return nscache::reload_command(args);
    if (command == "dump") return nscache::dump_command(args);
    if (command == "load") return nscache::load_command(args);
    if (command == "check-config") return nscache::check_config_command(args);
    std::fprintf(stderr, "nscache: unknown command '%s'\n\n%s", command.c_str(), kUsage);
    return nscache::kExitUsage;
}
