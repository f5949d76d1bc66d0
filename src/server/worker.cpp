// SPDX-License-Identifier: BSD-3-Clause
#include "server/worker.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"

namespace nscache::server {

// Accepts connections on one TCP listening socket of this worker. Clients outside `allow` are
// closed at once, before they cost a connection slot or a byte of buffer.
class TcpAcceptor final : public EventHandler {
  public:
    TcpAcceptor(int fd, EventLoop& loop, const SettingsPtr& settings, TcpConnections& connections,
                WorkerCounters& counters)
        : fd_(fd),
          loop_(loop),
          settings_(settings),
          connections_(connections),
          counters_(counters) {
        spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    }
    ~TcpAcceptor() {
        loop_.cancel_timer(resume_timer_);
        close(fd_);
        if (spare_ >= 0) close(spare_);
    }

    int fd() const { return fd_; }
    void registered(EventLoop::Registration reg) { registration_ = reg; }

    void on_event(uint32_t) override {
        for (int i = 0; i < 64; ++i) {
            sockaddr_storage peer{};
            socklen_t len = sizeof peer;
            const int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE) out_of_descriptors();
                return;
            }
            if (!settings_->access.allows(reinterpret_cast<const sockaddr*>(&peer))) {
                close(fd);
                bump(counters_.tcp_rejected);
                continue;
            }
            if (connections_.adopt(fd, peer, len)) {
                bump(counters_.tcp_connections);
            } else {
                bump(counters_.tcp_rejected);
            }
        }
    }

  private:
    // The pending connection keeps the listening socket readable: on a level-triggered loop
    // that is a busy spin. Shed it with the spare descriptor; if even that fails (the system
    // is out of files), stop listening for a moment.
    void out_of_descriptors() {
        log_warning_limited("accept: out of file descriptors; shedding TCP connections");
        if (spare_ >= 0) {
            close(spare_);
            const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (fd >= 0) {
                close(fd);
                bump(counters_.tcp_rejected);
            }
            spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
            if (fd >= 0) return;
        }
        if (resume_timer_ != EventLoop::kNoTimer) return;
        loop_.modify(registration_, 0);
        resume_timer_ = loop_.add_timer(loop_.now_ms() + kPauseMs, [this] {
            resume_timer_ = EventLoop::kNoTimer;
            if (spare_ < 0) spare_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
            loop_.modify(registration_, EPOLLIN);
        });
    }

    static constexpr uint64_t kPauseMs = 100;
    const int fd_;
    EventLoop& loop_;
    const SettingsPtr& settings_;  // the worker's current settings
    TcpConnections& connections_;
    WorkerCounters& counters_;
    int spare_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    EventLoop::TimerHandle resume_timer_ = EventLoop::kNoTimer;
};

Worker::Worker(uint32_t index, ServerShared& shared, WorkerCounters& counters,
               const std::vector<int>& udp_fds, const std::vector<int>& tcp_fds,
               SettingsPtr settings)
    : settings_(std::move(settings)),
      counters_(counters),
      queue_(loop_),
      resolver_(index, loop_, shared.resolver, pipeline_, counters, settings_->routing),
      pipeline_(shared, loop_, resolver_, counters, *this, *settings_),
      tcp_(loop_, pipeline_, shared.tcp) {
    resolver_.apply(settings_->routing, settings_->resolver);
    tcp_.set_limits(settings_->tcp);
    const size_t max_answer = std::max<size_t>(shared.config.edns_buffer_size, dns::kMinUdpPayload);
    for (size_t i = 0; i < udp_fds.size(); ++i) {
        udp_.push_back(std::make_unique<UdpSocket>(udp_fds[i], static_cast<uint16_t>(i), pipeline_,
                                                   max_answer));
    }
    for (int fd : tcp_fds) {
        acceptors_.push_back(std::make_unique<TcpAcceptor>(fd, loop_, settings_, tcp_, counters_));
    }
    loop_.set_turn_end([this] {
        for (auto& socket : udp_) socket->flush_later_replies();
    });
}

Worker::~Worker() {
    tcp_.close_all();
}

void Worker::run() {
    EventLoop::Registration ignored;
    for (auto& socket : udp_) loop_.add(socket->fd(), EPOLLIN, socket.get(), ignored);
    for (auto& acceptor : acceptors_) {
        EventLoop::Registration reg;
        if (loop_.add(acceptor->fd(), EPOLLIN, acceptor.get(), reg)) acceptor->registered(reg);
    }
    loop_.run([this] {
        adopt_posted_settings();
        queue_.drain(pipeline_);
    });
    tcp_.close_all();
}

void Worker::adopt_posted_settings() {
    SettingsPtr next;
    if (!mailbox_.take_latest(next)) return;
    // Everything that points into the old settings switches before they are released.
    pipeline_.apply(*next);
    resolver_.apply(next->routing, next->resolver);
    tcp_.set_limits(next->tcp);
    settings_ = std::move(next);
}

void Worker::send_reply(const PendingClient& client, std::span<const uint8_t> reply) {
    if (client.transport == Transport::Udp) {
        udp_[client.udp_socket]->send_later(reinterpret_cast<const sockaddr*>(&client.peer),
                                            client.peer_len, reply);
        return;
    }
    if (TcpConnection* connection = tcp_.find(client.tcp_connection)) {
        connection->send_answer(reply);
    }
}

}  // namespace nscache::server
