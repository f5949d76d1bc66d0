// SPDX-License-Identifier: BSD-3-Clause
#include "upstream/probe.h"

#include <sys/socket.h>
#include <unistd.h>

#include "common/random.h"
#include "dns/response.h"

namespace nscache::upstream {
namespace {

constexpr uint64_t kProbeTimeoutMs = 1000;
const uint8_t kRootName[1] = {0};

dns::UpstreamQuestion probe_question() {
    return dns::UpstreamQuestion{dns::Bytes(kRootName, 1), dns::rtype::NS, dns::kClassIN, false,
                                 false};
}

}  // namespace

UpstreamProbe::UpstreamProbe(EventLoop& loop, UpstreamSet& upstreams, size_t index,
                             uint16_t edns_size, MessageStream* stream)
    : loop_(loop), upstreams_(upstreams), index_(index), edns_size_(edns_size), stream_(stream) {}

UpstreamProbe::~UpstreamProbe() {
    close_socket();
    if (stream_pending_) stream_->cancel(id_, this);
}

void UpstreamProbe::on_stream_answer(dns::Bytes, uint32_t) {
    stream_pending_ = false;
    const uint64_t rtt_ms = loop_.now_ms() - sent_at_ms_;
    upstreams_.record_answer(index_, static_cast<uint32_t>(rtt_ms * 1000), loop_.now_ms());
}

void UpstreamProbe::close_socket() {
    if (fd_ < 0) return;
    loop_.remove(registration_);
    close(fd_);
    fd_ = -1;
}

void UpstreamProbe::send() {
    if (stream_ != nullptr) {
        if (stream_pending_ && loop_.now_ms() - sent_at_ms_ < kProbeTimeoutMs) return;
        if (stream_pending_) stream_->cancel(id_, this);
        static const dns::UpstreamQuestion question = probe_question();
        stream_pending_ = stream_->send(question, this, id_);
        sent_at_ms_ = loop_.now_ms();
        return;
    }
    if (fd_ >= 0 && loop_.now_ms() - sent_at_ms_ < kProbeTimeoutMs) return;
    close_socket();
    const SocketAddress& to = upstreams_.at(index_).address;
    fd_ = socket(to.family(), SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd_ < 0) return;
    if (!loop_.add(fd_, EPOLLIN, this, registration_)) {
        close(fd_);
        fd_ = -1;
        return;
    }
    id_ = secure_random_u16();
    uint8_t wire[dns::kMaxUpstreamQuery];
    const size_t n = dns::write_upstream_query(probe_question(), id_, edns_size_, wire);
    sendto(fd_, wire, n, 0, to.sa(), to.length);
    sent_at_ms_ = loop_.now_ms();
}

void UpstreamProbe::on_event(uint32_t) {
    uint8_t buffer[4096];
    sockaddr_storage from{};
    socklen_t from_len = sizeof from;
    const ssize_t n =
        recvfrom(fd_, buffer, sizeof buffer, 0, reinterpret_cast<sockaddr*>(&from), &from_len);
    if (n < 0) return;
    const bool from_upstream =
        SocketAddress::from_sockaddr(reinterpret_cast<const sockaddr*>(&from), from_len) ==
        upstreams_.at(index_).address;
    // Any well-formed reply counts (even REFUSED for the root): the server is alive.
    if (from_upstream &&
        dns::answers_question(dns::Bytes(buffer, static_cast<size_t>(n)), id_, probe_question())) {
        const uint64_t rtt_ms = loop_.now_ms() - sent_at_ms_;
        upstreams_.record_answer(index_, static_cast<uint32_t>(rtt_ms * 1000), loop_.now_ms());
        close_socket();
    }
}

}  // namespace nscache::upstream
