// SPDX-License-Identifier: BSD-3-Clause
// The host fronts' one thread: an event loop serving the request sockets of both protocols
// that answer glibc (the NSS module's socket, nssd/, and glibc's nscd client, nscd/), with one
// HostLookup (one Resolver, one completion queue, one counter block) and so one reader and
// watcher of /etc/hosts for both: an edit reloads the file once and tells each protocol once.
// (The supervisor reads `hosts-file` too, for the names DNS clients get from it; a reload that
// changes those flushes each map once more, after the new routing is in force, so that no
// answer published under the old routing outlives it.)
// Construction, add(), start() and stop() are for the daemon's main thread; post_settings()
// for any thread; the rest for the front's thread (from a Protocol's hooks).
//
// Why one thread for both: a lookup answered from /etc/hosts or the cache takes microseconds,
// and upstream waits are asynchronous, so neither protocol needs a core of its own; one
// HostsFile means one parse and one invalidation of each map per edit, and one Resolver
// halves the upstream sockets the fronts hold.
//
// Guarantees
// - A lookup's answer reaches the protocol that started it, with the id it gave, exactly once
//   (HostLookup's contract; the front's own table of lookups in flight maps the cookie back).
// - Neither protocol, nor one user, can starve the rest (review finding 2): the front's
//   Resolver holds a share of max-upstream-queries for each protocol (the descriptor budget
//   counts each, daemon/resource_limits.h); a protocol has at most max_in_flight() lookups
//   waiting on an upstream, half its share (a lookup asks A and AAAA at once), and a user
//   (SO_PEERCRED uid; root has no share) at most its share of those. A lookup counts until it
//   ends, whether or not its client is still connected, so asking and hanging up piles up
//   nothing. A lookup past a bound is answered TryAgain at once, never held. (Not counted: an
//   upstream query a lookup left behind when serve-stale's timer answered it; it holds its
//   resolver slot until the upstream's own timeout.)
// - stop() stops the loop, joins the thread, then runs each protocol's on_stopped() in the
//   order they were added: add the nscd protocol first, so that at shutdown glibc's clients
//   are told the map is gone before anything else stops.
// - Tests may drive the loop on their own thread instead (run_on_this_thread(), run_once(),
//   a FakeClock): the same hooks run in the same order.
#pragma once

#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <thread>
#include <unordered_map>

#include "common/clock.h"
#include "common/counters.h"
#include "common/event_loop.h"
#include "common/mailbox.h"
#include "common/request_connection.h"
#include "common/slot_table.h"
#include "hostdb/host_lookup.h"
#include "upstream/completion.h"
#include "upstream/forwarding_settings.h"
#include "upstream/resolver.h"

namespace nscache::front {

// One protocol on the front: the handler of its request socket, and the front's hooks.
class Protocol : public RequestHandler {
  public:
    // The answer to a lookup started with HostFront::lookup() that did not finish at once.
    virtual void host_done(uint64_t id, const hostdb::HostAnswer& answer) = 0;
    // /etc/hosts was read (at start, then after every change): what this protocol published
    // may be stale.
    virtual void hosts_changed() = 0;
    // The daemon's thread, from HostFront::start(), before the loop's thread exists: listen
    // and accept on the socket, start helper threads.
    virtual void start() = 0;
    // The front's thread, once, before the first turn.
    virtual void on_thread_start() {}
    // The front's thread, after every wake-up (its own queues, flags set by other threads).
    virtual void on_wake() {}
    // The daemon's thread, after the front's thread has stopped.
    virtual void on_stopped() {}

  protected:
    ~Protocol() = default;
};

struct HostFrontOptions {
    hostdb::HostLookupOptions lookup;
};

class HostFront final : public hostdb::HostSink {
  public:
    static constexpr size_t kMaxProtocols = 2;
    // The uid of the daemon's own lookups (nscd's prefetch): held to a share like a user's.
    static constexpr uid_t kNoUser = static_cast<uid_t>(-1);

    // `worker_index`: this thread's index among the resolver's completion queues.
    HostFront(upstream::ResolverShared& resolver, WorkerCounters& counters, uint32_t worker_index,
              upstream::ForwardingSettingsPtr settings, HostFrontOptions options = {},
              const Clock& clock = system_clock());
    ~HostFront();
    HostFront(const HostFront&) = delete;
    HostFront& operator=(const HostFront&) = delete;

    // Before start(); at most kMaxProtocols, in stop order. `protocol` outlives the loop's use
    // of it: stop() (or the test's last run_once) comes before its destruction.
    // `max_per_user`: the lookups one user may have in flight on this protocol (its
    // max-connections-per-user: what its open clients could ask at once), at most a quarter of
    // max_in_flight(); 0: that quarter.
    void add(Protocol& protocol, size_t max_per_user = 0);

    EventLoop& loop() { return loop_; }
    WorkerCounters& counters() { return counters_; }
    upstream::CompletionQueue& completion_queue() { return lookup_.completion_queue(); }

    // The front's thread: the answer when it is known at once (TryAgain past a bound);
    // otherwise nullopt, and protocol.host_done(id, ...) follows exactly once, later. `uid`:
    // the client's (SO_PEERCRED), or kNoUser.
    std::optional<hostdb::HostAnswer> lookup(Protocol& protocol, const hostdb::HostQuery& query,
                                             uint64_t id, uid_t uid);
    // The lookups one protocol may have waiting on an upstream at once.
    size_t max_in_flight() const;
    // The lookups of `protocol` waiting now (tests).
    size_t in_flight(const Protocol& protocol) const { return shares_[tag_of(protocol)].in_flight; }

    // Any thread: lookups switch to `settings` (its routing) at the thread's next wake-up.
    void post_settings(upstream::ForwardingSettingsPtr settings) {
        mailbox_.post(std::move(settings));
    }

    // Starts every protocol, then the thread.
    void start();
    // Stops and joins the thread, then runs the protocols' on_stopped(). The destructor only
    // joins: call stop() while the protocols still exist.
    void stop();

    // Tests: start() without the thread (the protocols' start(), then on_thread_start() here),
    // then one loop turn per run_once(), with the wake-up hooks after it.
    void run_on_this_thread();
    void run_once(int max_wait_ms);

    void host_done(uint64_t cookie, const hostdb::HostAnswer& answer) override;

  private:
    // A protocol and its lookups in flight.
    struct Share {
        Protocol* protocol = nullptr;
        size_t max_per_user = 0;
        size_t in_flight = 0;
        std::unordered_map<uid_t, size_t> per_user;  // in flight, by uid (root's uncounted)
    };
    // A lookup in flight: its id in pending_ is HostLookup's cookie.
    struct Pending {
        size_t tag = 0;  // its protocol's index in shares_
        uint64_t id = 0;
        uid_t uid = kNoUser;
    };
    using PendingId = SlotTable<Pending>::Id;

    void begin();  // on the loop's thread, before the first turn
    void on_wake();
    size_t tag_of(const Protocol& protocol) const;
    size_t user_bound(const Share& share) const;
    void end(PendingId id);
    // The resolver's options with a share of queries for each protocol.
    upstream::ResolverOptions resolver_options(const upstream::ResolverOptions& options) const;

    WorkerCounters& counters_;
    EventLoop loop_;
    upstream::ForwardingSettingsPtr settings_;
    Mailbox<upstream::ForwardingSettingsPtr> mailbox_;
    hostdb::HostLookup lookup_;
    std::array<Share, kMaxProtocols> shares_{};
    size_t protocol_count_ = 0;
    SlotTable<Pending> pending_;
    bool started_ = false;  // start() or run_on_this_thread() ran, stop() not yet
    std::thread thread_;
};

}  // namespace nscache::front
