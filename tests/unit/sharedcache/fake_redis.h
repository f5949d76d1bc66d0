// SPDX-License-Identifier: BSD-3-Clause
// Test helper: a Redis server the test answers by hand, on a loopback port. It accepts any
// number of connections, parses the commands hiredis sends (RESP arrays of bulk strings) and
// writes back whatever raw RESP the test gives it, so tests can answer late, never, wrongly,
// or with MOVED and ASK.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/address.h"

namespace nscache::sharedcache::testing {

class FakeRedis {
  public:
    struct Command {
        size_t connection = 0;
        std::vector<std::string> args;
    };

    FakeRedis() {
        listener_ = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        listen(listener_, 16);
        socklen_t len = sizeof a;
        getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
        address = SocketAddress::from_sockaddr(reinterpret_cast<sockaddr*>(&a), sizeof a);
    }
    ~FakeRedis() {
        for (const Connection& c : connections_) {
            if (c.fd >= 0) close(c.fd);
        }
        close(listener_);
    }
    FakeRedis(const FakeRedis&) = delete;
    FakeRedis& operator=(const FakeRedis&) = delete;

    // The next complete command from any connection, if one has arrived.
    std::optional<Command> take() {
        accept_pending();
        for (size_t i = 0; i < connections_.size(); ++i) {
            Connection& c = connections_[i];
            if (c.fd < 0) continue;
            char buf[65536];
            for (;;) {
                const ssize_t n = recv(c.fd, buf, sizeof buf, MSG_DONTWAIT);
                if (n <= 0) break;
                c.in.append(buf, static_cast<size_t>(n));
            }
            if (auto args = parse(c.in)) return Command{i, std::move(*args)};
        }
        return std::nullopt;
    }

    void reply(const Command& to, std::string_view resp) {
        const Connection& c = connections_[to.connection];
        if (c.fd >= 0) send(c.fd, resp.data(), resp.size(), MSG_NOSIGNAL);
    }

    // Connections accepted so far (closed ones included).
    size_t connections() {
        accept_pending();
        return connections_.size();
    }

    static std::string bulk(std::string_view s) {
        return "$" + std::to_string(s.size()) + "\r\n" + std::string(s) + "\r\n";
    }

    SocketAddress address;

  private:
    struct Connection {
        int fd = -1;
        std::string in;
    };

    void accept_pending() {
        for (;;) {
            const int fd = accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd < 0) return;
            connections_.push_back(Connection{fd, {}});
        }
    }

    // One "*N\r\n($len\r\narg\r\n)*N" off the front of `in`, if it is all there.
    static std::optional<std::vector<std::string>> parse(std::string& in) {
        size_t pos = 0;
        auto line = [&](std::string& out) {
            const size_t end = in.find("\r\n", pos);
            if (end == std::string::npos) return false;
            out = in.substr(pos, end - pos);
            pos = end + 2;
            return true;
        };
        std::string head;
        if (!line(head) || head.empty() || head[0] != '*') return std::nullopt;
        const int count = std::stoi(head.substr(1));
        std::vector<std::string> args;
        for (int i = 0; i < count; ++i) {
            std::string len;
            if (!line(len)) return std::nullopt;
            const size_t n = std::stoul(len.substr(1));
            if (pos + n + 2 > in.size()) return std::nullopt;
            args.push_back(in.substr(pos, n));
            pos += n + 2;
        }
        in.erase(0, pos);
        return args;
    }

    int listener_ = -1;
    std::vector<Connection> connections_;
};

}  // namespace nscache::sharedcache::testing
