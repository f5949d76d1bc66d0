// SPDX-License-Identifier: BSD-3-Clause
// The subcommands that talk to a running daemon over its control socket, and check-config.
#include <cstdio>

#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "config/config.h"
#include "control/control_client.h"

namespace nscache {
namespace {

constexpr const char* kDefaultControl = "/run/nscache/control.sock";

struct ControlArgs {
    std::string control = kDefaultControl;
    bool json = false;
    std::vector<std::string> positional;
};

std::optional<ControlArgs> parse(const char* command, const Args& args, bool allow_json) {
    ControlArgs out;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) {
            out.positional.push_back(p.current());
            continue;
        }
        if (p.name() == "json" && allow_json) {
            out.json = true;
            continue;
        }
        if (p.name() != "control") {
            std::fprintf(stderr, "nscache %s: unknown flag --%s\n", command, p.name().c_str());
            return std::nullopt;
        }
        auto v = p.value();
        if (!v) {
            std::fprintf(stderr, "nscache %s: %s\n", command, p.error().c_str());
            return std::nullopt;
        }
        out.control = *v;
    }
    return out;
}

int run_request(const std::string& control, const std::string& request) {
    std::string error;
    auto reply = control::control_request(control, request, error);
    if (!reply) {
        std::fprintf(stderr, "nscache: %s\n", error.c_str());
        return kExitFailure;
    }
    if (!reply->ok) {
        std::fprintf(stderr, "nscache: %s\n", reply->body.c_str());
        return kExitFailure;
    }
    std::fputs(reply->body.c_str(), stdout);
    return kExitOk;
}

int file_command(const char* command, const Args& args) {
    auto parsed = parse(command, args, false);
    if (!parsed) return kExitUsage;
    if (parsed->positional.size() != 1) {
        std::fprintf(stderr, "usage: nscache %s [--control PATH] FILE\n", command);
        return kExitUsage;
    }
    // Sent as given: the daemon takes a relative FILE inside its state folder (state-dir),
    // never in our working directory, and refuses anything outside that folder.
    return run_request(parsed->control, std::string(command) + " " + parsed->positional[0]);
}

}  // namespace

int stats_command(const Args& args) {
    auto parsed = parse("stats", args, true);
    if (!parsed) return kExitUsage;
    if (!parsed->positional.empty()) {
        std::fprintf(stderr, "usage: nscache stats [--control PATH] [--json]\n");
        return kExitUsage;
    }
    return run_request(parsed->control, parsed->json ? "stats json" : "stats");
}

int reload_command(const Args& args) {
    auto parsed = parse("reload", args, false);
    if (!parsed) return kExitUsage;
    if (!parsed->positional.empty()) {
        std::fprintf(stderr, "usage: nscache reload [--control PATH]\n");
        return kExitUsage;
    }
    return run_request(parsed->control, "reload");
}

int flush_command(const Args& args) {
    auto parsed = parse("flush", args, false);
    if (!parsed) return kExitUsage;
    if (parsed->positional.size() > 1) {
        std::fprintf(stderr, "usage: nscache flush [--control PATH] [NAME]\n");
        return kExitUsage;
    }
    return run_request(parsed->control,
                       parsed->positional.empty() ? "flush" : "flush " + parsed->positional[0]);
}

int dump_command(const Args& args) {
    return file_command("dump", args);
}
int load_command(const Args& args) {
    return file_command("load", args);
}

int check_config_command(const Args& args) {
    if (args.size() != 1) {
        std::fprintf(stderr, "usage: nscache check-config FILE\n");
        return kExitUsage;
    }
    Config config;
    if (auto error = load_config_file(args[0], config)) {
        std::fprintf(stderr, "nscache: %s\n", error->message.c_str());
        return kExitUsage;
    }
    std::printf("%s: ok\n", args[0].c_str());
    return kExitOk;
}

}  // namespace nscache
