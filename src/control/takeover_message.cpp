// SPDX-License-Identifier: BSD-3-Clause
#include "control/takeover_message.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

namespace nscache::control {
namespace {

// Room for the largest message: header, count, and every name at its longest.
constexpr size_t kMaxBody = 2 + kMaxTakeoverFds * (1 + kMaxTakeoverName);

bool name_char(char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view(" ._:/@-").find(c) != std::string_view::npos;  // never NUL
}

bool valid_name(std::string_view name) {
    if (name.empty() || name.size() > kMaxTakeoverName) return false;
    for (char c : name) {
        if (!name_char(c)) return false;
    }
    return true;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

std::string errno_text() {
    return std::strerror(errno);
}

// Every descriptor of every SCM_RIGHTS message in `msg`, in order.
std::vector<int> received_fds(msghdr& msg) {
    std::vector<int> fds;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            fds.push_back(fd);
        }
    }
    return fds;
}

void close_fds(const std::vector<int>& fds) {
    for (int fd : fds) close(fd);
}

}  // namespace

Result<std::vector<uint8_t>> encode_takeover_names(const std::vector<std::string>& names) {
    if (names.size() > kMaxTakeoverFds) return Error{"too many descriptors to hand over"};
    std::vector<uint8_t> body;
    body.push_back(static_cast<uint8_t>(names.size()));
    body.push_back(static_cast<uint8_t>(names.size() >> 8));
    for (const std::string& name : names) {
        if (!valid_name(name)) return Error{"bad descriptor name '" + name + "'"};
        body.push_back(static_cast<uint8_t>(name.size()));
        body.insert(body.end(), name.begin(), name.end());
    }
    std::vector<uint8_t> out(kTakeoverMagic, kTakeoverMagic + sizeof kTakeoverMagic);
    put_u32(out, static_cast<uint32_t>(body.size()));
    out.insert(out.end(), body.begin(), body.end());
    return out;
}

Result<size_t> takeover_body_length(std::span<const uint8_t> header) {
    if (header.size() < kTakeoverHeader ||
        std::memcmp(header.data(), kTakeoverMagic, sizeof kTakeoverMagic) != 0) {
        return Error{"not a takeover message"};
    }
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) length |= uint32_t{header[sizeof kTakeoverMagic + i]} << (8 * i);
    if (length < 2 || length > kMaxBody) return Error{"takeover message of a bad length"};
    return static_cast<size_t>(length);
}

Result<std::vector<std::string>> decode_takeover_body(std::span<const uint8_t> body,
                                                      size_t fds_received) {
    if (body.size() < 2) return Error{"takeover message too short"};
    const size_t count = body[0] | (size_t{body[1]} << 8);
    if (count > kMaxTakeoverFds) return Error{"takeover message names too many descriptors"};
    if (count != fds_received) {
        return Error{"takeover message names " + std::to_string(count) + " descriptors but " +
                     std::to_string(fds_received) + " came"};
    }
    std::vector<std::string> names;
    size_t at = 2;
    for (size_t i = 0; i < count; ++i) {
        if (at >= body.size()) return Error{"takeover message cut short"};
        const size_t length = body[at++];
        if (length > body.size() - at) return Error{"takeover message cut short"};
        std::string name(reinterpret_cast<const char*>(body.data() + at), length);
        at += length;
        if (!valid_name(name)) return Error{"takeover message has a bad descriptor name"};
        names.push_back(std::move(name));
    }
    if (at != body.size()) return Error{"takeover message has bytes after its names"};
    return names;
}

Result<void> send_takeover(int socket_fd, const std::vector<NamedFd>& fds) {
    std::vector<std::string> names;
    for (const NamedFd& f : fds) names.push_back(f.name);
    Result<std::vector<uint8_t>> bytes = encode_takeover_names(names);
    if (!bytes) return Error{bytes.error()};
    std::vector<char> control(CMSG_SPACE(sizeof(int) * fds.size()));
    iovec iov{bytes->data(), bytes->size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds.empty()) {
        msg.msg_control = control.data();
        msg.msg_controllen = control.size();
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        for (size_t i = 0; i < fds.size(); ++i) {
            std::memcpy(CMSG_DATA(c) + i * sizeof(int), &fds[i].fd, sizeof(int));
        }
    }
    ssize_t sent;
    do {
        sent = sendmsg(socket_fd, &msg, MSG_NOSIGNAL);
    } while (sent < 0 && errno == EINTR);
    if (sent < 0) return Error{"cannot send the takeover message: " + errno_text()};
    if (static_cast<size_t>(sent) != bytes->size()) {
        return Error{"the takeover message did not go out whole"};
    }
    return {};
}

Result<std::vector<NamedFd>> receive_takeover(int socket_fd) {
    // The descriptors ride on the message's first bytes, so the first recvmsg gets them all;
    // later reads only complete the body.
    std::vector<uint8_t> in(kTakeoverHeader + kMaxBody);
    std::vector<char> control(CMSG_SPACE(sizeof(int) * kMaxTakeoverFds));
    iovec iov{in.data(), in.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    ssize_t n;
    do {
        n = recvmsg(socket_fd, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0 && errno == ECONNRESET) return Error{kClosedBeforeOffer};
    if (n < 0) {
        return Error{errno == EAGAIN || errno == EWOULDBLOCK
                         ? std::string("no answer to the takeover request in time")
                         : "cannot read the takeover answer: " + errno_text()};
    }
    std::vector<int> fds = received_fds(msg);
    auto fail = [&fds](std::string message) -> Result<std::vector<NamedFd>> {
        close_fds(fds);
        return Error{std::move(message)};
    };
    if (msg.msg_flags & MSG_CTRUNC)
        return fail("the takeover message carried too many descriptors");
    size_t have = static_cast<size_t>(n);
    if (have == 0) return fail(kClosedBeforeOffer);
    // A refusal is one text line.
    if (in[0] != static_cast<uint8_t>(kTakeoverMagic[0])) {
        std::string line(reinterpret_cast<const char*>(in.data()), have);
        while (!line.empty() && line.back() == '\n') line.pop_back();
        if (line.rfind("error: ", 0) == 0) line.erase(0, 7);
        return fail(line.substr(0, 200));
    }
    auto read_to = [&](size_t wanted) -> bool {
        while (have < wanted) {
            const ssize_t r = recv(socket_fd, in.data() + have, wanted - have, 0);
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return false;
            have += static_cast<size_t>(r);
        }
        return true;
    };
    if (!read_to(kTakeoverHeader)) return fail("takeover message cut short");
    Result<size_t> body = takeover_body_length(std::span(in.data(), kTakeoverHeader));
    if (!body) return fail(body.error());
    const size_t total = kTakeoverHeader + *body;
    // Nothing may follow the message before the new instance speaks again.
    if (have > total) return fail("takeover message has bytes after its names");
    if (!read_to(total)) return fail("takeover message cut short");
    Result<std::vector<std::string>> names =
        decode_takeover_body(std::span(in.data() + kTakeoverHeader, *body), fds.size());
    if (!names) return fail(names.error());
    std::vector<NamedFd> out;
    for (size_t i = 0; i < fds.size(); ++i) out.push_back({std::move((*names)[i]), fds[i]});
    return out;
}

void close_all(std::vector<NamedFd>& fds) {
    for (NamedFd& f : fds) {
        if (f.fd >= 0) close(f.fd);
    }
    fds.clear();
}

}  // namespace nscache::control
