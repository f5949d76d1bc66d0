// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/udp_socket_pool.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "common/random.h"

namespace nscache::upstream {
namespace {

// Datagrams drained from an idle socket per readiness event.
constexpr int kMaxIdleReads = 8;

}  // namespace

void UdpSocketPool::Socket::on_event(uint32_t) {
    if (receiver_ != nullptr) {
        receiver_->on_readable();
    } else {
        pool_->on_idle_readable(*this);
    }
}

UdpSocketPool::UdpSocketPool(EventLoop& loop, WorkerCounters& counters, UdpPoolOptions options)
    : loop_(loop), counters_(counters), options_(options) {}

UdpSocketPool::~UdpSocketPool() {
    for (auto& s : sockets_) {
        loop_.forget(s->registration_);
        close(s->fd_);
    }
}

std::vector<UdpSocketPool::Socket*>& UdpSocketPool::idle_of(int family) {
    return family == AF_INET6 ? idle_v6_ : idle_v4_;
}

size_t UdpSocketPool::idle(int family) const {
    return family == AF_INET6 ? idle_v6_.size() : idle_v4_.size();
}

UdpSocketPool::Socket* UdpSocketPool::open_socket(int family) {
    const int fd = socket(family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return nullptr;
    // Port 0: Linux picks the port at random from the ephemeral range (and never one that is
    // bound already), so the pool's ports are as unpredictable as a fresh socket's.
    sockaddr_storage any{};
    socklen_t any_len;
    if (family == AF_INET6) {
        auto* a6 = reinterpret_cast<sockaddr_in6*>(&any);
        a6->sin6_family = AF_INET6;
        any_len = sizeof(sockaddr_in6);
    } else {
        auto* a4 = reinterpret_cast<sockaddr_in*>(&any);
        a4->sin_family = AF_INET;
        any_len = sizeof(sockaddr_in);
    }
    if (bind(fd, reinterpret_cast<sockaddr*>(&any), any_len) != 0) {
        const int error = errno;
        close(fd);
        errno = error;
        return nullptr;
    }
    auto socket = std::make_unique<Socket>();
    socket->pool_ = this;
    socket->fd_ = fd;
    socket->family_ = family;
    socket->opened_ms_ = loop_.now_ms();
    if (!loop_.add(fd, EPOLLIN, socket.get(), socket->registration_)) {
        const int error = errno;
        close(fd);
        errno = error;
        return nullptr;
    }
    socket->slot_ = sockets_.size();
    Socket* raw = socket.get();
    sockets_.push_back(std::move(socket));
    bump(counters_.upstream_sockets_opened);
    return raw;
}

void UdpSocketPool::close_socket(Socket* socket) {
    loop_.forget(socket->registration_);  // ours alone: close() leaves the epoll set
    close(socket->fd_);
    // Swap-remove from sockets_; the moved socket learns its new slot.
    const size_t slot = socket->slot_;
    if (slot + 1 != sockets_.size()) {
        sockets_[slot] = std::move(sockets_.back());
        sockets_[slot]->slot_ = slot;
    }
    sockets_.pop_back();  // destroys `socket`
}

UdpSocketPool::Socket* UdpSocketPool::acquire(int family, Receiver* receiver) {
    std::vector<Socket*>& idle = idle_of(family);
    // Top the pool up first, so the draw below is among at least idle_sockets ports.
    while (idle.size() < options_.idle_sockets) {
        Socket* fresh = open_socket(family);
        if (fresh == nullptr) break;
        idle.push_back(fresh);
    }
    if (idle.empty()) return nullptr;
    const size_t pick = secure_random_u64() % idle.size();
    Socket* socket = idle[pick];
    idle[pick] = idle.back();
    idle.pop_back();
    socket->receiver_ = receiver;
    ++socket->uses_;
    return socket;
}

bool UdpSocketPool::due(const Socket& socket) const {
    return socket.tainted_ || socket.uses_ >= options_.max_uses ||
           loop_.now_ms() - socket.opened_ms_ >= options_.max_age_ms;
}

void UdpSocketPool::release(Socket* socket, bool answered) {
    socket->receiver_ = nullptr;
    if (!answered || due(*socket)) {
        if (socket->tainted_) bump(counters_.upstream_sockets_spoofed);
        close_socket(socket);
        return;
    }
    idle_of(socket->family_).push_back(socket);
}

void UdpSocketPool::taint(Socket* socket) {
    socket->tainted_ = true;
}

void UdpSocketPool::on_idle_readable(Socket& socket) {
    uint8_t discard[512];
    bool got = false;
    for (int i = 0; i < kMaxIdleReads; ++i) {
        if (recv(socket.fd_, discard, sizeof discard, MSG_DONTWAIT) < 0) break;
        bump(counters_.dropped_mismatched);
        got = true;
    }
    if (!got) return;
    // Nobody asked anything on this port now: whoever sent this may be probing it.
    std::vector<Socket*>& idle = idle_of(socket.family_);
    for (size_t i = 0; i < idle.size(); ++i) {
        if (idle[i] == &socket) {
            idle[i] = idle.back();
            idle.pop_back();
            break;
        }
    }
    bump(counters_.upstream_sockets_spoofed);
    close_socket(&socket);
}

}  // namespace nscache::upstream
