// SPDX-License-Identifier: BSD-3-Clause
// `nscache invalidate DATABASE`: what `nscd -i DATABASE` does, for hosts where the nscd
// package is gone (sss_cache and friends call `nscd -i`). It sends glibc's INVALIDATE request
// on the nscd socket, which the daemon answers for root only, and flushes that database.
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "config/config.h"
#include "nscd/protocol.h"

namespace nscache {
namespace {

constexpr const char* kDefaultConfig = "/etc/nscache/nscache.toml";
// Where glibc's client looks, and where an installed nscache listens.
constexpr const char* kDefaultNscdSocket = "/var/run/nscd/socket";
constexpr int kTimeoutS = 5;  // as glibc's client waits for a reply
constexpr const char* kUsage =
    "usage: nscache invalidate [--nscd-socket PATH] [--config FILE] "
    "passwd|group|services|hosts\n";

int fail(const std::string& message) {
    std::fprintf(stderr, "nscache invalidate: %s\n", message.c_str());
    return kExitFailure;
}

bool known_database(const std::string& db) {
    return db == "passwd" || db == "group" || db == "services" || db == "hosts";
}

// Writes all of `data`; false on an error (errno set).
bool send_all(int fd, const std::vector<uint8_t>& data) {
    size_t sent = 0;
    while (sent < data.size()) {
        const ssize_t n = send(fd, data.data() + sent, data.size() - sent, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) return false;
        sent += static_cast<size_t>(n);
    }
    return true;
}

// Reads the reply's int32 status; its size read (0: closed without a reply), -1 on an error.
ssize_t read_status(int fd, int32_t& status) {
    auto* out = reinterpret_cast<uint8_t*>(&status);
    size_t got = 0;
    while (got < sizeof status) {
        const ssize_t n = recv(fd, out + got, sizeof status - got, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return -1;
        if (n == 0) break;
        got += static_cast<size_t>(n);
    }
    return static_cast<ssize_t>(got);
}

int invalidate(const std::string& path, const std::string& db) {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof addr.sun_path) return fail("socket path too long: " + path);
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return fail(std::string("socket: ") + std::strerror(errno));
    struct Closer {
        int fd;
        ~Closer() { close(fd); }
    } closer{fd};
    const timeval timeout{kTimeoutS, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
    if (connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        const int e = errno;
        if (e == ENOENT || e == ECONNREFUSED) {
            return fail("no daemon listens on " + path + " (" + std::strerror(e) +
                        "): is nscache running with nscd-socket set?");
        }
        return fail("cannot connect to " + path + ": " + std::strerror(e));
    }
    nscd::RequestHeader header{};
    header.version = nscd::kProtocolVersion;
    header.type = nscd::INVALIDATE;
    header.key_len = static_cast<int32_t>(db.size() + 1);
    std::vector<uint8_t> request(sizeof header + db.size() + 1, 0);
    std::memcpy(request.data(), &header, sizeof header);
    std::memcpy(request.data() + sizeof header, db.c_str(), db.size());
    if (!send_all(fd, request)) {
        return fail("cannot send to " + path + ": " + std::strerror(errno));
    }
    int32_t status = -1;
    const ssize_t got = read_status(fd, status);
    if (got < 0) {
        return fail("no reply from " + path + ": " + std::strerror(errno));
    }
    if (got == 0) {
        // The daemon closes without a word on a request it refuses (as nscd does).
        if (geteuid() != 0) return fail("refused (only root may invalidate)");
        return fail("the daemon on " + path + " closed the connection without a reply");
    }
    if (got != sizeof status) return fail("a short reply from " + path);
    if (status != 0) {
        return fail("the daemon on " + path + " refused to invalidate " + db + " (status " +
                    std::to_string(status) + ")");
    }
    std::printf("%s invalidated\n", db.c_str());
    return kExitOk;
}

}  // namespace

int invalidate_command(const Args& args) {
    std::string socket_path;
    std::string config_path;
    bool config_given = false;
    std::vector<std::string> positional;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) {
            positional.push_back(p.current());
            continue;
        }
        const std::string name = p.name();
        if (name != "nscd-socket" && name != "config") {
            std::fprintf(stderr, "nscache invalidate: unknown flag --%s\n%s", name.c_str(), kUsage);
            return kExitUsage;
        }
        auto value = p.value();
        if (!value) {
            std::fprintf(stderr, "nscache invalidate: %s\n", p.error().c_str());
            return kExitUsage;
        }
        if (name == "nscd-socket") {
            socket_path = *value;
        } else {
            config_path = *value;
            config_given = true;
        }
    }
    if (positional.size() != 1 || !known_database(positional[0])) {
        std::fputs(kUsage, stderr);
        return kExitUsage;
    }
    if (socket_path.empty()) {
        // The socket the daemon's configuration names, as `nscache serve` reads it.
        if (!config_given && access(kDefaultConfig, F_OK) == 0) config_path = kDefaultConfig;
        if (!config_path.empty()) {
            Config config;
            if (auto error = load_config_file(config_path, config)) {
                // The installed file half-edited must not stop a flush of the daemon that
                // runs with the file as it was: only a --config asked for is binding.
                std::fprintf(stderr, "nscache invalidate: %s\n", error->message.c_str());
                if (config_given) return kExitUsage;
                std::fprintf(stderr, "nscache invalidate: using %s\n", kDefaultNscdSocket);
            } else {
                socket_path = config.nscd_socket;
            }
        }
        if (socket_path.empty()) socket_path = kDefaultNscdSocket;
    }
    return invalidate(socket_path, positional[0]);
}

}  // namespace nscache
