// SPDX-License-Identifier: BSD-3-Clause
#include "server/worker.h"

#include <unistd.h>

#include <algorithm>

#include "common/readiness.h"

namespace nscache::server {

Worker::Worker(uint32_t index, ServerShared& shared, WorkerCounters& counters,
               const std::vector<int>& udp_fds, const std::vector<int>& tcp_fds,
               SettingsPtr settings, const Clock& clock)
    : settings_(std::move(settings)),
      loop_(clock),
      counters_(counters),
      queue_(loop_),
      resolver_(index, loop_, shared.resolver, pipeline_, counters, settings_->routing),
      pipeline_(shared, loop_, resolver_, counters, *this, *settings_),
      tcp_(loop_, pipeline_, shared.tcp),
      https_(loop_, pipeline_, shared.tcp, counters) {
    tcp_.set_counters(&counters_);
    https_.configure(settings_->tcp, settings_->config.https_path);
    resolver_.apply(settings_->routing, settings_->resolver);
    tcp_.set_limits(settings_->tcp);
    const size_t max_answer = std::max<size_t>(shared.config.edns_buffer_size, dns::kMinUdpPayload);
    for (size_t i = 0; i < udp_fds.size(); ++i) {
        udp_.push_back(std::make_unique<UdpSocket>(udp_fds[i], static_cast<uint16_t>(i), pipeline_,
                                                   max_answer));
    }
    for (int fd : tcp_fds) {
        tcp_fds_.push_back(fd);
        auto listener = std::make_unique<Listener>(
            loop_, fd, "DNS TCP socket",
            [this](int client, const sockaddr_storage& peer, socklen_t length) {
                accept_tcp(client, peer, length);
            });
        listener->set_on_shed([this] { bump(counters_.tcp_rejected); });
        acceptors_.push_back(std::move(listener));
    }
    loop_.set_turn_end([this] {
        for (auto& socket : udp_) socket->flush_later_replies();
        if (draining_) check_drained();
    });
}

Worker::~Worker() {
    tcp_.close_all();
    acceptors_.clear();
    tls_acceptors_.clear();
    https_.close_all();
    https_acceptors_.clear();
    for (const auto* fds : {&tcp_fds_, &tls_fds_, &https_fds_}) {
        for (int fd : *fds) {
            if (fd >= 0) close(fd);
        }
    }
}

void Worker::set_encrypted_listeners(std::vector<int> tls_fds, std::vector<int> https_fds) {
    tls_fds_ = std::move(tls_fds);
    https_fds_ = std::move(https_fds);
    for (int fd : tls_fds_) {
        auto listener = std::make_unique<Listener>(
            loop_, fd, "DNS over TLS socket",
            [this](int client, const sockaddr_storage& peer, socklen_t length) {
                accept_tls(client, peer, length);
            });
        listener->set_on_shed([this] { bump(counters_.dot_rejected); });
        tls_acceptors_.push_back(std::move(listener));
    }
    for (int fd : https_fds_) {
        auto listener = std::make_unique<Listener>(
            loop_, fd, "DNS over HTTPS socket",
            [this](int client, const sockaddr_storage& peer, socklen_t length) {
                accept_https(client, peer, length);
            });
        listener->set_on_shed([this] { bump(counters_.doh_rejected); });
        https_acceptors_.push_back(std::move(listener));
    }
}

void Worker::accept_https(int fd, const sockaddr_storage& peer, socklen_t length) {
    const TlsServerContext* context = settings_->tls.doh.get();
    if (context == nullptr || !settings_->access.allows(reinterpret_cast<const sockaddr*>(&peer))) {
        close(fd);
        bump(counters_.doh_rejected);
        return;
    }
    if (https_.adopt(fd, peer, length, context->ctx())) {
        bump(counters_.doh_connections);
    } else {
        bump(counters_.doh_rejected);
    }
}

// As accept_tcp, into the same table (the caps and byte bounds are TCP's), with the TLS
// context of the settings in force: a reload's new certificate is for connections after it.
void Worker::accept_tls(int fd, const sockaddr_storage& peer, socklen_t length) {
    const TlsServerContext* context = settings_->tls.dot.get();
    if (context == nullptr || !settings_->access.allows(reinterpret_cast<const sockaddr*>(&peer))) {
        close(fd);
        bump(counters_.dot_rejected);
        return;
    }
    if (tcp_.adopt(fd, peer, length, context->ctx())) {
        bump(counters_.dot_connections);
    } else {
        bump(counters_.dot_rejected);
    }
}

void Worker::set_private_listeners(const std::vector<int>& fds) {
    auto is_private = [&fds](int fd) { return std::find(fds.begin(), fds.end(), fd) != fds.end(); };
    udp_private_.assign(udp_.size(), false);
    for (size_t i = 0; i < udp_.size(); ++i) udp_private_[i] = is_private(udp_[i]->fd());
    tcp_private_.assign(tcp_fds_.size(), false);
    for (size_t i = 0; i < tcp_fds_.size(); ++i) tcp_private_[i] = is_private(tcp_fds_[i]);
}

// Clients outside `allow` are closed at once, before they cost a connection slot or a byte of
// buffer.
void Worker::accept_tcp(int fd, const sockaddr_storage& peer, socklen_t length) {
    if (!settings_->access.allows(reinterpret_cast<const sockaddr*>(&peer))) {
        close(fd);
        bump(counters_.tcp_rejected);
        return;
    }
    if (tcp_.adopt(fd, peer, length)) {
        bump(counters_.tcp_connections);
    } else {
        bump(counters_.tcp_rejected);
    }
}

void Worker::start_listening() {
    const uint32_t events = EPOLLIN | (shared_listeners_ ? EPOLLEXCLUSIVE : 0u);
    udp_registrations_.assign(udp_.size(), EventLoop::kNoRegistration);
    for (size_t i = 0; i < udp_.size(); ++i) {
        loop_.add(udp_[i]->fd(), events, udp_[i].get(), udp_registrations_[i]);
    }
    for (auto& acceptor : acceptors_) {
        acceptor->set_exclusive(shared_listeners_);
        acceptor->start();
    }
    for (auto& acceptor : tls_acceptors_) acceptor->start();
    for (auto& acceptor : https_acceptors_) acceptor->start();
}

void Worker::run() {
    start_listening();
    loop_.refresh_now();
    beat();
    loop_.run([this] { on_wake(); });
    set_level(counters_.heartbeat_ms, kHeartbeatFinished);
    tcp_.close_all();
    https_.close_all();
}

// A timer of its own, so that an idle loop beats too; a wedged one stops (/health fails).
void Worker::beat() {
    if (drained_) return;
    set_level(counters_.heartbeat_ms, loop_.now_ms());
    loop_.add_timer(loop_.now_ms() + kHeartbeatIntervalMs, [this] { beat(); });
}

void Worker::run_once(int max_wait_ms) {
    loop_.run_once(max_wait_ms, [this] { on_wake(); });
}

void Worker::on_wake() {
    adopt_posted_settings();
    queue_.drain(pipeline_);
    if (!draining_ && drain_deadline_ms_.load(std::memory_order_acquire) != 0) start_drain();
}

void Worker::request_drain(uint64_t deadline_ms, bool refuse_private) {
    refuse_private_.store(refuse_private, std::memory_order_relaxed);
    drain_deadline_ms_.store(deadline_ms == 0 ? 1 : deadline_ms, std::memory_order_release);
    loop_.wake();
}

void Worker::start_drain() {
    draining_ = true;
    const bool refuse = refuse_private_.load(std::memory_order_relaxed);
    for (size_t i = 0; i < udp_.size(); ++i) {
        if (refuse && i < udp_private_.size() && udp_private_[i] && udp_[i]->refuse_new_queries()) {
            refusing_.push_back(udp_[i].get());  // stays in the loop: its queue is read
        } else if (i < udp_registrations_.size()) {
            loop_.remove(udp_registrations_[i]);
        }
    }
    for (size_t i = 0; i < acceptors_.size(); ++i) {
        acceptors_[i]->stop();
        // Clients waiting in its backlog are reset and those that come later refused, at
        // once, instead of waiting for an accept that never comes.
        if (refuse && i < tcp_private_.size() && tcp_private_[i]) {
            close(tcp_fds_[i]);
            tcp_fds_[i] = -1;
        }
    }
    for (size_t i = 0; i < tls_acceptors_.size(); ++i) {
        tls_acceptors_[i]->stop();
        if (refuse) {  // bound here, never handed on: nothing queued in it would be read
            close(tls_fds_[i]);
            tls_fds_[i] = -1;
        }
    }
    for (size_t i = 0; i < https_acceptors_.size(); ++i) {
        https_acceptors_[i]->stop();
        if (refuse) {
            close(https_fds_[i]);
            https_fds_[i] = -1;
        }
    }
    tcp_.drain_all();
    https_.drain_all();
    drain_timer_ = loop_.add_timer(drain_deadline_ms_.load(std::memory_order_acquire), [this] {
        drain_timer_ = EventLoop::kNoTimer;
        finish_drain();
    });
}

void Worker::check_drained() {
    // Queries waiting on upstream answers are pending clients; queries of no client
    // (prefetch, a coalesced query's upstream side) may still fill the cache, which is saved
    // next: wait for them too (the deadline bounds them all).
    if (drained_ || pipeline_.pending().size() != 0 || resolver_.outstanding() != 0 ||
        tcp_.size() != 0 || https_.size() != 0) {
        return;
    }
    for (const UdpSocket* socket : refusing_) {
        if (socket->has_queued()) return;
    }
    loop_.cancel_timer(drain_timer_);
    finish_drain();
}

void Worker::finish_drain() {
    drained_ = true;
    set_level(counters_.heartbeat_ms, kHeartbeatFinished);
    loop_.request_stop();
}

void Worker::adopt_posted_settings() {
    SettingsPtr next;
    if (!mailbox_.take_latest(next)) return;
    // Everything that points into the old settings switches before they are released.
    pipeline_.apply(*next);
    resolver_.apply(next->routing, next->resolver);
    tcp_.set_limits(next->tcp);
    https_.configure(next->tcp, next->config.https_path);
    settings_ = std::move(next);
}

void Worker::send_reply(const PendingClient& client, std::span<const uint8_t> reply) {
    if (client.transport == Transport::Udp) {
        udp_[client.udp_socket]->send_later(reinterpret_cast<const sockaddr*>(&client.peer),
                                            client.peer_len, reply);
        return;
    }
    if (client.transport == Transport::Https) {
        if (HttpsConnection* connection = https_.find(client.tcp_connection)) {
            connection->send_answer(client.stream, reply);
        }
        return;
    }
    if (TcpConnection* connection = tcp_.find(client.tcp_connection)) {
        connection->send_answer(reply);
    }
}

}  // namespace nscache::server
