// SPDX-License-Identifier: BSD-3-Clause
// `nscache query`: one question to a DNS server (the daemon by default), the answer printed
// in dig's layout. UDP first with EDNS; TCP when the answer comes back truncated or --tcp.
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <vector>

#include "cli/commands.h"
#include "cli/flag_parser.h"
#include "common/random.h"
#include "config/address.h"
#include "dns/name.h"
#include "dns/presentation.h"
#include "dns/response.h"

namespace nscache {
namespace {

constexpr int kTimeoutMs = 3000;
constexpr uint16_t kUdpSize = 1232;

bool wait_readable(int fd) {
    pollfd p{fd, POLLIN, 0};
    return poll(&p, 1, kTimeoutMs) == 1;
}

std::optional<std::vector<uint8_t>> ask_udp(const SocketAddress& server, dns::Bytes query) {
    const int fd = socket(server.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0 || connect(fd, server.sa(), server.length) != 0 ||
        send(fd, query.data(), query.size(), 0) < 0 || !wait_readable(fd)) {
        if (fd >= 0) close(fd);
        return std::nullopt;
    }
    std::vector<uint8_t> answer(65535);
    const ssize_t n = recv(fd, answer.data(), answer.size(), 0);
    close(fd);
    if (n <= 0) return std::nullopt;
    answer.resize(static_cast<size_t>(n));
    return answer;
}

std::optional<std::vector<uint8_t>> ask_tcp(const SocketAddress& server, dns::Bytes query) {
    const int fd = socket(server.family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return std::nullopt;
    std::vector<uint8_t> framed(2 + query.size());
    dns::write_u16(framed.data(), static_cast<uint16_t>(query.size()));
    std::copy(query.begin(), query.end(), framed.begin() + 2);
    if (connect(fd, server.sa(), server.length) != 0 ||
        send(fd, framed.data(), framed.size(), MSG_NOSIGNAL) !=
            static_cast<ssize_t>(framed.size())) {
        close(fd);
        return std::nullopt;
    }
    std::vector<uint8_t> buffer;
    size_t want = 2;
    while (buffer.size() < want) {
        if (!wait_readable(fd)) break;
        uint8_t chunk[4096];
        const ssize_t n = recv(fd, chunk, sizeof chunk, 0);
        if (n <= 0) break;
        buffer.insert(buffer.end(), chunk, chunk + n);
        if (want == 2 && buffer.size() >= 2) want = 2 + dns::read_u16(buffer.data());
    }
    close(fd);
    if (buffer.size() < want || want == 2) return std::nullopt;
    return std::vector<uint8_t>(buffer.begin() + 2, buffer.begin() + static_cast<long>(want));
}

int usage(const std::string& message) {
    std::fprintf(
        stderr,
        "nscache query: %s\nusage: nscache query [--server ADDR:PORT] [--tcp] NAME [TYPE]\n",
        message.c_str());
    return kExitUsage;
}

}  // namespace

int query_command(const Args& args) {
    SocketAddress server = *parse_socket_address("127.0.0.1:53", std::nullopt);
    bool tcp = false;
    std::vector<std::string> positional;
    FlagParser p(args);
    while (p.next()) {
        if (!p.is_flag()) {
            positional.push_back(p.current());
        } else if (p.name() == "tcp") {
            tcp = true;
        } else if (p.name() == "server") {
            auto v = p.value();
            if (!v) return usage(p.error());
            auto a = parse_socket_address(*v, 53);
            if (!a) return usage("bad --server address '" + *v + "'");
            server = *a;
        } else {
            return usage("unknown flag --" + p.name());
        }
    }
    if (positional.empty() || positional.size() > 2) return usage("expected NAME [TYPE]");
    auto name = dns::name_from_text(positional[0]);
    if (!name) return usage("bad name '" + positional[0] + "'");
    uint16_t qtype = dns::rtype::A;
    if (positional.size() == 2) {
        auto t = dns::type_from_text(positional[1]);
        if (!t) return usage("unknown type '" + positional[1] + "'");
        qtype = *t;
    }

    std::array<uint8_t, dns::kMaxUpstreamQuery> query{};
    const dns::UpstreamQuestion question{name->view(), qtype, dns::kClassIN, false, false};
    const uint16_t id = secure_random_u16();
    const size_t length = dns::write_upstream_query(question, id, kUdpSize, query);
    const dns::Bytes wire(query.data(), length);

    std::optional<std::vector<uint8_t>> answer;
    if (!tcp) answer = ask_udp(server, wire);
    if (tcp || (answer && answer->size() >= dns::kHeaderSize &&
                dns::read_header(dns::Bytes(*answer)).has(dns::flag::TC))) {
        answer = ask_tcp(server, wire);
    }
    if (!answer) {
        std::fprintf(stderr, "nscache query: no answer from %s\n", server.to_string().c_str());
        return kExitFailure;
    }
    std::fputs(dns::message_to_text(dns::Bytes(*answer)).c_str(), stdout);
    std::printf(";; SERVER: %s (%s)\n", server.to_string().c_str(), tcp ? "tcp" : "udp");
    return kExitOk;
}

}  // namespace nscache
