#include "server/worker.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "common/log.h"

namespace nscache::server {

// Accepts connections on one TCP listening socket of this worker.
class TcpAcceptor final : public EventHandler {
  public:
    TcpAcceptor(int fd, TcpConnections& connections, WorkerCounters& counters)
        : fd_(fd), connections_(connections), counters_(counters) {}
    ~TcpAcceptor() { close(fd_); }

    int fd() const { return fd_; }

    void on_event(uint32_t) override {
        for (int i = 0; i < 64; ++i) {
            sockaddr_storage peer{};
            socklen_t len = sizeof peer;
            const int fd = accept4(fd_, reinterpret_cast<sockaddr*>(&peer), &len,
                                   SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE) log_warning("accept: out of descriptors");
                return;
            }
            if (connections_.adopt(fd, peer, len)) {
                bump(counters_.tcp_connections);
            } else {
                bump(counters_.tcp_rejected);
            }
        }
    }

  private:
    const int fd_;
    TcpConnections& connections_;
    WorkerCounters& counters_;
};

Worker::Worker(uint32_t index, ServerShared& shared, WorkerCounters& counters,
               const std::vector<int>& udp_fds, const std::vector<int>& tcp_fds)
    : counters_(counters),
      queue_(loop_),
      resolver_(index, loop_, shared.resolver, pipeline_, counters),
      pipeline_(shared, loop_, resolver_, counters, *this),
      tcp_(loop_, pipeline_, shared.tcp_connections, shared.config.max_tcp_connections,
           shared.config.tcp_idle_timeout_ms) {
    const size_t max_answer = std::max<size_t>(shared.config.edns_buffer_size, dns::kMinUdpPayload);
    for (size_t i = 0; i < udp_fds.size(); ++i) {
        udp_.push_back(std::make_unique<UdpSocket>(udp_fds[i], static_cast<uint16_t>(i), pipeline_,
                                                   max_answer));
    }
    for (int fd : tcp_fds) acceptors_.push_back(std::make_unique<TcpAcceptor>(fd, tcp_, counters_));
}

Worker::~Worker() {
    tcp_.close_all();
}

void Worker::run() {
    EventLoop::Registration ignored;
    for (auto& socket : udp_) loop_.add(socket->fd(), EPOLLIN, socket.get(), ignored);
    for (auto& acceptor : acceptors_) loop_.add(acceptor->fd(), EPOLLIN, acceptor.get(), ignored);
    loop_.run([this] { queue_.drain(pipeline_); });
    tcp_.close_all();
}

void Worker::send_reply(const PendingClient& client, std::span<const uint8_t> reply) {
    if (client.transport == Transport::Udp) {
        udp_[client.udp_socket]->send_to(reinterpret_cast<const sockaddr*>(&client.peer),
                                         client.peer_len, reply);
        return;
    }
    if (TcpConnection* connection = tcp_.find(client.tcp_connection)) {
        connection->send_answer(reply);
    }
}

}  // namespace nscache::server
