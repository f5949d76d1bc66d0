// SPDX-License-Identifier: BSD-3-Clause
// responder: a do-nothing UDP DNS responder that shows the ceiling of the loopback path.
//
// It answers every well-formed query with one fixed A record (127.0.0.1, TTL 3600) for the
// name asked, echoing the ID, the RD bit and the question. No cache, no upstream, no parsing
// beyond the question. Batched with recvmmsg/sendmmsg, one thread.
//
//   responder --listen 127.0.0.1:PORT [--batch N]
//
// Prints "info: listening on udp ADDR:PORT" and "info: ready" on stderr, then serves until
// SIGTERM or SIGINT. Exit 0 on a signal, 2 on a bad argument, 1 on a socket error.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

volatile std::sig_atomic_t g_stop = 0;

void on_signal(int) {
    g_stop = 1;
}

constexpr std::size_t kMaxPacket = 512;  // queries larger than this are ignored
constexpr std::size_t kMaxBatch = 256;

bool parse_addr(const std::string& s, sockaddr_in& out) {
    auto colon = s.rfind(':');
    if (colon == std::string::npos) return false;
    std::string host = s.substr(0, colon);
    char* end = nullptr;
    long port = std::strtol(s.c_str() + colon + 1, &end, 10);
    if (*end != '\0' || port < 0 || port > 65535) return false;
    std::memset(&out, 0, sizeof out);
    out.sin_family = AF_INET;
    out.sin_port = htons(static_cast<std::uint16_t>(port));
    return inet_pton(AF_INET, host.c_str(), &out.sin_addr) == 1;
}

// Builds the answer for query q (length n) into out; returns its length, or 0 to drop.
std::size_t build_answer(const std::uint8_t* q, std::size_t n, std::uint8_t* out) {
    if (n < 12 + 5) return 0;
    if (q[2] & 0x80) return 0;             // a response, not a query
    if (q[4] != 0 || q[5] != 1) return 0;  // QDCOUNT must be 1
    std::size_t p = 12;
    for (int labels = 0; labels < 128; ++labels) {  // bounded walk over the labels
        if (p >= n) return 0;
        std::uint8_t len = q[p];
        if (len == 0) {
            ++p;
            break;
        }
        if (len > 63) return 0;  // no compression in a question
        p += 1 + len;
    }
    if (p + 4 > n || p > 12 + 255 + 1) return 0;
    std::size_t qend = p + 4;  // end of the question section
    std::memcpy(out, q, qend);
    out[2] = static_cast<std::uint8_t>(0x80 | (q[2] & 0x01));  // QR, opcode 0, RD echoed
    out[3] = 0x80;                                             // RA, RCODE 0
    out[6] = 0;
    out[7] = 1;  // ANCOUNT 1
    out[8] = 0;
    out[9] = 0;  // NSCOUNT 0
    out[10] = 0;
    out[11] = 0;  // ARCOUNT 0 (EDNS not echoed)
    static constexpr std::array<std::uint8_t, 16> rr = {
        0xC0, 0x0C,              // name: pointer to the question
        0x00, 0x01, 0x00, 0x01,  // type A, class IN
        0x00, 0x00, 0x0E, 0x10,  // TTL 3600
        0x00, 0x04,              // RDLENGTH
        127,  0,    0,    1};
    std::memcpy(out + qend, rr.data(), rr.size());
    return qend + rr.size();
}

}  // namespace

int main(int argc, char** argv) {
    std::string listen = "127.0.0.1:15354";
    std::size_t batch = 64;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--listen" && i + 1 < argc) {
            listen = argv[++i];
        } else if (a == "--batch" && i + 1 < argc) {
            batch = std::strtoul(argv[++i], nullptr, 10);
        } else {
            std::fprintf(stderr, "usage: responder --listen ADDR:PORT [--batch N]\n");
            return 2;
        }
    }
    if (batch < 1 || batch > kMaxBatch) {
        std::fprintf(stderr, "error: --batch must be 1..%zu\n", kMaxBatch);
        return 2;
    }
    sockaddr_in addr{};
    if (!parse_addr(listen, addr)) {
        std::fprintf(stderr, "error: bad --listen address: %s\n", listen.c_str());
        return 2;
    }

    struct sigaction sa {};
    sa.sa_handler = on_signal;  // no SA_RESTART: recvmmsg returns EINTR
    sigaction(SIGTERM, &sa, nullptr);
    sigaction(SIGINT, &sa, nullptr);

    int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        std::perror("socket");
        return 1;
    }
    int buf = 4 << 20;
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buf, sizeof buf);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buf, sizeof buf);
    if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        std::fprintf(stderr, "error: cannot bind udp %s: %s\n", listen.c_str(),
                     std::strerror(errno));
        return 1;
    }
    socklen_t alen = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen);
    char host[INET_ADDRSTRLEN];
    inet_ntop(AF_INET, &addr.sin_addr, host, sizeof host);
    std::fprintf(stderr, "info: listening on udp %s:%u\ninfo: ready\n", host, ntohs(addr.sin_port));

    std::vector<std::array<std::uint8_t, kMaxPacket>> in(batch), out(batch);
    std::vector<sockaddr_in> peers(batch);
    std::vector<iovec> in_iov(batch), out_iov(batch);
    std::vector<mmsghdr> in_msgs(batch), out_msgs(batch);
    for (std::size_t i = 0; i < batch; ++i) {
        in_iov[i] = {in[i].data(), in[i].size()};
    }
    unsigned long long answered = 0;
    while (!g_stop) {
        for (std::size_t i = 0; i < batch; ++i) {
            in_msgs[i] = {};
            in_msgs[i].msg_hdr.msg_name = &peers[i];
            in_msgs[i].msg_hdr.msg_namelen = sizeof(sockaddr_in);
            in_msgs[i].msg_hdr.msg_iov = &in_iov[i];
            in_msgs[i].msg_hdr.msg_iovlen = 1;
        }
        int got =
            recvmmsg(fd, in_msgs.data(), static_cast<unsigned>(batch), MSG_WAITFORONE, nullptr);
        if (got < 0) {
            if (errno == EINTR) continue;
            std::perror("recvmmsg");
            return 1;
        }
        unsigned n_out = 0;
        for (int i = 0; i < got; ++i) {
            if (in_msgs[i].msg_hdr.msg_flags & MSG_TRUNC) continue;
            std::size_t len = build_answer(in[i].data(), in_msgs[i].msg_len, out[n_out].data());
            if (len == 0) continue;
            out_iov[n_out] = {out[n_out].data(), len};
            out_msgs[n_out] = {};
            out_msgs[n_out].msg_hdr.msg_name = &peers[i];
            out_msgs[n_out].msg_hdr.msg_namelen = in_msgs[i].msg_hdr.msg_namelen;
            out_msgs[n_out].msg_hdr.msg_iov = &out_iov[n_out];
            out_msgs[n_out].msg_hdr.msg_iovlen = 1;
            ++n_out;
        }
        unsigned done = 0;
        for (int tries = 0; done < n_out && tries < 8 && !g_stop; ++tries) {
            int s = sendmmsg(fd, out_msgs.data() + done, n_out - done, 0);
            if (s < 0) {
                if (errno == EINTR || errno == EAGAIN || errno == ENOBUFS) continue;
                break;  // drop this batch (a client's port went away, for example)
            }
            done += static_cast<unsigned>(s);
        }
        answered += done;
    }
    std::fprintf(stderr, "info: stopping, answered %llu queries\n", answered);
    close(fd);
    return 0;
}
