// SPDX-License-Identifier: BSD-3-Clause
// A host front driven on the test's thread with a fake clock: a temp folder holding the hosts
// file and the sockets, the daemon-wide pieces a HostFront needs (cache, settings, resolver
// state), and clients that connect from a child process (as another process, or another
// user, would: SO_PEERCRED is taken at connect()). Test-only; one thread.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "cache/cache.h"
#include "common/counters.h"
#include "config/address.h"
#include "fake_clock.h"
#include "front/host_front.h"
#include "server/settings.h"
#include "upstream/resolver.h"
#include "upstream/routing.h"

namespace nscache::front::testing {

inline void write_file(const std::string& path, const std::string& text) {
    FILE* f = std::fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs(text.c_str(), f);
    std::fclose(f);
}

// A temp folder, removed with what is in it.
struct TempFolder {
    TempFolder() {
        char name[] = "/tmp/nscache-front-XXXXXX";
        EXPECT_NE(mkdtemp(name), nullptr);
        path = name;
        chmod(path.c_str(), 0755);  // a client of another user reaches the sockets in it
    }
    ~TempFolder() {
        const std::string command = "rm -rf '" + path + "'";
        EXPECT_EQ(std::system(command.c_str()), 0);
    }
    std::string operator/(const std::string& name) const { return path + "/" + name; }
    std::string path;
};

// `upstream`: where names the hosts file lacks are asked (none: such lookups have no
// server to go to).
inline Config config_with(std::optional<SocketAddress> upstream) {
    Config c;
    if (upstream) c.upstreams.push_back(*upstream);
    c.forward_private_zones = true;  // the tests ask .test names
    return c;
}

struct FrontHarness {
    // `max_upstream_queries`: max-upstream-queries as the descriptor budget fitted it.
    explicit FrontHarness(const std::string& hosts_text = "192.0.2.1 one one-alias\n",
                          std::optional<SocketAddress> upstream = std::nullopt,
                          uint32_t max_upstream_queries = 4096)
        : config(config_with(upstream)),
          cache(cache::CacheConfig{.budget_bytes = size_t{1} << 20}),
          settings(server::make_settings(config, upstream::Routing::build(config, registry, {}),
                                         max_upstream_queries)),
          resolver_shared{settings->resolver, cache, {}, {}},
          front(resolver_shared, counters, 0, settings, options(), clock) {
        write_file(hosts_path(), hosts_text);
        resolver_shared.queues.push_back(&front.completion_queue());
    }

    std::string hosts_path() const { return folder / "hosts"; }
    std::string socket_path(const std::string& name) const { return folder / name; }

    HostFrontOptions options() const {
        HostFrontOptions o;
        o.lookup.hosts.hosts = hosts_path();
        o.lookup.hosts.host_conf = folder / "host.conf";
        o.lookup.resolv_conf = folder / "resolv.conf";
        return o;
    }

    // Turns of the loop that wait for nothing: what is ready runs, timers due by the fake
    // clock fire.
    void turns(int n = 5) {
        for (int i = 0; i < n; ++i) front.run_once(0);
    }

    TempFolder folder;
    nscache::testing::FakeClock clock;
    Config config;
    upstream::UpstreamRegistry registry;
    cache::Cache cache;
    server::SettingsPtr settings;
    upstream::ResolverShared resolver_shared;
    WorkerCounters counters;
    HostFront front;
};

// A client socket connected to `path` by a child process (running as `uid` when it is not -1
// and this process is root), handed back to this process: the daemon sees the child's pid and
// uid. Non-blocking. -1 on failure.
inline int connect_as_child(const std::string& path, uid_t uid = static_cast<uid_t>(-1)) {
    int carrier[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, carrier) != 0) return -1;
    const pid_t child = fork();
    if (child == 0) {
        if (uid != static_cast<uid_t>(-1) &&
            (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0)) {
            _exit(1);
        }
        const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
        if (fd < 0 || connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) _exit(1);
        char byte = 0;
        iovec iov{&byte, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
        _exit(sendmsg(carrier[1], &msg, 0) == 1 ? 0 : 1);
    }
    int status = 0;
    waitpid(child, &status, 0);
    int fd = -1;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        char byte;
        iovec iov{&byte, 1};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        if (recvmsg(carrier[0], &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC) == 1 &&
            CMSG_FIRSTHDR(&msg) != nullptr) {
            std::memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&msg)), sizeof fd);
        }
    }
    close(carrier[0]);
    close(carrier[1]);
    if (fd >= 0) fcntl(fd, F_SETFL, O_NONBLOCK);
    return fd;
}

// The client's end: still open on the daemon's side (nothing to read, no end of file)?
inline bool held(int fd) {
    char b;
    return recv(fd, &b, 1, MSG_DONTWAIT | MSG_PEEK) < 0 && errno == EAGAIN;
}

// Everything the daemon wrote before it closed the connection (call after the turns that
// answer); `closed` says whether it did close.
inline std::vector<uint8_t> read_reply(int fd, bool* closed = nullptr) {
    std::vector<uint8_t> out;
    uint8_t buffer[4096];
    if (closed != nullptr) *closed = false;
    for (;;) {
        const ssize_t n = recv(fd, buffer, sizeof buffer, MSG_DONTWAIT);
        if (n > 0) {
            out.insert(out.end(), buffer, buffer + n);
            continue;
        }
        if (n == 0 && closed != nullptr) *closed = true;
        break;
    }
    return out;
}

inline void send_all(int fd, const std::vector<uint8_t>& bytes) {
    ASSERT_EQ(send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(bytes.size()));
}

}  // namespace nscache::front::testing
