// SPDX-License-Identifier: BSD-3-Clause
// One worker's UDP listening socket: reads queries in batches with recvmmsg, answers the
// cache hits of a batch with one sendmmsg. Answers to misses, which come later, are gathered
// over one turn of the event loop and sent with one sendmmsg when the turn ends.
#pragma once

#include <sys/socket.h>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/event_loop.h"
#include "server/query_pipeline.h"

namespace nscache::server {

class UdpSocket final : public EventHandler {
  public:
    UdpSocket(int fd, uint16_t index, QueryPipeline& pipeline, size_t max_answer);
    ~UdpSocket();

    int fd() const { return fd_; }
    void on_event(uint32_t events) override;
    // Queues an answer that was not ready when its query came; sent by flush_later_replies()
    // (or at once when the queue is full).
    void send_later(const sockaddr* peer, socklen_t peer_len, std::span<const uint8_t> reply);
    void flush_later_replies();
    // The drain of a socket no other process holds: from now on the kernel finds no socket
    // for new queries and answers them with ICMP port unreachable (the client's resolver
    // tries its next server at once), while this one still sends the answers to queries it
    // has read and reads those queued before. How: connect() to its own address, so that
    // only datagrams from itself would match it (a connected member of an SO_REUSEPORT group
    // is skipped for other peers, Linux 5.x udp4_lib_lookup2). shutdown(SHUT_RD) would not
    // do: the kernel still queues datagrams for it, silently. False (nothing changed) for a
    // socket bound to the unspecified address, whose connect() would fix a source address.
    bool refuse_new_queries();
    // Something is queued to read (refuse_new_queries(): the rest of what came before).
    bool has_queued() const;

  private:
    static constexpr int kBatch = 32;
    static constexpr size_t kMaxQuery = 4096;

    // Returns how many datagrams were read.
    int process_batch();
    void send_replies(int from, int to);
    void send_batch(mmsghdr* msgs, int from, int to);

    const int fd_;
    const uint16_t index_;
    QueryPipeline& pipeline_;
    const size_t max_answer_;

    std::vector<uint8_t> in_;   // kBatch * kMaxQuery
    std::vector<uint8_t> out_;  // kBatch * max_answer_
    mmsghdr in_msgs_[kBatch];
    iovec in_iov_[kBatch];
    sockaddr_storage peers_[kBatch];
    mmsghdr out_msgs_[kBatch];
    iovec out_iov_[kBatch];

    // Answers to misses waiting for the end of the loop's turn.
    std::vector<uint8_t> later_;  // kBatch * max_answer_
    mmsghdr later_msgs_[kBatch];
    iovec later_iov_[kBatch];
    sockaddr_storage later_peers_[kBatch];
    int later_count_ = 0;
};

}  // namespace nscache::server
