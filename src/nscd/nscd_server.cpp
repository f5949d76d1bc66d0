// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/nscd_server.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <ctime>

#include "common/log.h"
#include "nscd/host_records.h"

namespace nscache::nscd {
namespace {

constexpr size_t kMaxConnections = NscdServer::kMaxConnections;
constexpr size_t kMaxRequests = 2 * kMaxConnections;
// A client waits 5 s for its reply; a connection still unanswered just before that is closed
// without one, so the client asks NSS itself at once instead of after its own timeout.
constexpr uint64_t kConnectionTimeoutMs = kClientTimeoutMs - 500;
constexpr uint64_t kHeartbeatMs = 1000;
// Prefetch: a record is refreshed this long before it expires (at least 1 s, 10% of its TTL),
// at most kRefreshes times since a client last asked for it over the socket (map hits are
// invisible here, as they are to nscd, which reloads an entry 5 times by default).
constexpr uint32_t kRefreshes = 5;
constexpr uint32_t kMinRefreshTtl = 2;
constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;

uint64_t wall_s() {
    return static_cast<uint64_t>(time(nullptr));
}

bool is_host_type(int32_t type) {
    return type == GETHOSTBYNAME || type == GETHOSTBYNAMEv6 || type == GETHOSTBYADDR ||
           type == GETHOSTBYADDRv6 || type == GETAI;
}

bool is_other_type(int32_t type) {
    return type == GETPWBYNAME || type == GETPWBYUID || type == GETGRBYNAME || type == GETGRBYGID ||
           type == INITGROUPS || type == GETSERVBYNAME || type == GETSERVBYPORT ||
           type == GETNETGRENT || type == INNETGR;
}

// A string key: NUL-terminated with no NUL inside.
bool string_key(const std::vector<uint8_t>& key, std::string& out) {
    if (key.empty() || key.back() != 0) return false;
    out.assign(reinterpret_cast<const char*>(key.data()), key.size() - 1);
    return out.find('\0') == std::string::npos;
}

}  // namespace

NscdServer::NscdServer(front::HostFront& front, NscdOptions options)
    : front_(front),
      counters_(front.counters()),
      loop_(front.loop()),
      options_(std::move(options)),
      map_(loop_, counters_, options_.map, 0, "hosts"),
      // The loop's clock: the deadlines given to the pool are read from it (a test's fake one).
      others_(loop_, options_.proxy_threads, other_database_reply,
              [&clock = loop_.clock()] { return milliseconds(clock.now()); }),
      requests_(kMaxRequests),
      users_(loop_, others_, counters_, options_.users,
             [this](uint64_t id) { return socket_.find(id); }),
      socket_(loop_, *this,
              front::RequestSocketOptions{.path = options_.socket_path,
                                          .what = "nscd socket",
                                          .max_connections = kMaxConnections,
                                          .timeout_ms = kConnectionTimeoutMs,
                                          .max_per_user = options_.max_connections_per_user,
                                          .inherited_fd = options_.inherited_fd}) {
    map_.writer().set_drop_listener([this](const std::string& key) { cancel_refresh(key); });
    map_.set_expired_listener([this] { set_levels(); });
    front.add(*this, options_.max_connections_per_user);
}

NscdServer::~NscdServer() {
    socket_.close_clients();
}

Result<void> NscdServer::open() {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof addr.sun_path) {
        return Error{"nscd socket path too long: " + options_.socket_path};
    }
    std::memcpy(addr.sun_path, options_.socket_path.c_str(), options_.socket_path.size() + 1);
    // A socket someone answers on belongs to a running nscd (or nsncd, unscd): taking it
    // over would leave two caches answering for hosts, one of them unseen.
    // (An inherited socket is ours: it answers because it listens already.)
    const int probe =
        options_.inherited_fd >= 0 ? -1 : socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe >= 0) {
        const bool live = connect(probe, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
        close(probe);
        if (live) {
            return Error{"nscd socket " + options_.socket_path +
                         " is held by a running nscd (or nsncd, unscd): stop it first (systemctl "
                         "stop nscd nsncd unscd), or set nscd-socket = \"\""};
        }
    }
    // Not listening yet: the daemon's own initgroups() must not wait on this socket.
    if (auto bound = socket_.bind(); !bound) return bound;
    if (auto error = map_.open(wall_s())) return Error{*error};
    if (auto error = users_.open(wall_s())) return Error{*error};
    // The policies; each database's plan (what auto made of nsswitch.conf) is logged when
    // the front first reads the files ("nscd passwd: files then systemd").
    log_info(
        "nscd socket %s (policies: nscd-passwd = %s, nscd-group = %s, nscd-services = %s; "
        "netgroup declined)",
        options_.socket_path.c_str(), db_policy_name(options_.users.passwd),
        db_policy_name(options_.users.group), db_policy_name(options_.users.services));
    return {};
}

void NscdServer::start() {
    // An inherited socket listens already (its owner chose the backlog).
    if (!socket_.inherited()) {
        if (auto listening = socket_.listen(4096); !listening) {
            log_error("%s", listening.error().c_str());
            return;
        }
    }
    socket_.start();
    const UserDbOptions& u = options_.users;
    if (options_.proxy_other_databases || u.passwd != DbPolicy::decline ||
        u.group != DbPolicy::decline || u.services != DbPolicy::decline) {
        others_.start();
    }
    serving_ = true;
}

void NscdServer::on_thread_start() {
    if (!serving_) return;
    const bool watching =
        netlink_.open(loop_, [this](uint32_t s) { map_.writer().set_netlink_stamp(s); });
    // Without netlink, 0: the clients dump their interfaces every time, as with no nscd.
    map_.writer().set_netlink_stamp(watching ? netlink_.stamp() : 0);
    users_.start();
    heartbeat();
}

void NscdServer::heartbeat() {
    map_.heartbeat(wall_s());
    users_.heartbeat(wall_s());
    loop_.add_timer(loop_.now_ms() + kHeartbeatMs, [this] { heartbeat(); });
}

void NscdServer::on_stopped() {
    if (!serving_) return;
    serving_ = false;
    // Clients first: every map says "gone" (they use NSS at once) and the socket closes with
    // the lookups not yet answered (their clients fall back to NSS now), before the pool,
    // whose threads may be stuck in an NSS module for as long as it likes.
    map_.shutdown();
    users_.shutdown();
    socket_.close();
    if (const size_t left = others_.stop()) {
        log_info("nscd: %zu lookup%s still in an NSS module at shutdown: not waited for", left,
                 left == 1 ? "" : "s");
    }
}

void NscdServer::on_wake() {
    others_.drain([this](uint64_t connection_id, std::vector<uint8_t> reply) {
        if (RequestConnection* c = socket_.find(connection_id)) c->send(std::move(reply));
    });
    if (flush_requested_.exchange(false)) flush_map();
}

void NscdServer::invalidate_map() {
    flush_requested_.store(true);
    loop_.wake();
}

void NscdServer::flush_map() {
    ++flushes_;
    map_.flush();
    set_levels();
}

void NscdServer::cancel_refresh(const std::string& index_key) {
    auto it = refresh_timers_.find(index_key);
    if (it == refresh_timers_.end()) return;
    loop_.cancel_timer(it->second);
    refresh_timers_.erase(it);
}

void NscdServer::set_levels() {
    set_level(counters_.nscd_map_records, map_.entries());
    set_level(counters_.nscd_refresh_timers, refresh_timers_.size());
}

size_t NscdServer::request_size(std::span<const uint8_t> in) const {
    RequestHeader header;
    if (in.size() < sizeof header) return 0;
    std::memcpy(&header, in.data(), sizeof header);
    // nscd drops a request of another version without a word; so does a bad length.
    if (header.version != kProtocolVersion || header.key_len < 0 ||
        static_cast<size_t>(header.key_len) > kMaxKeyLen) {
        return kInvalid;
    }
    return sizeof header + static_cast<size_t>(header.key_len);
}

void NscdServer::send_map(RequestConnection& connection) {
    int fd = -1;
    std::vector<uint8_t> reply = map_.fd_reply(fd);  // empty: the client uses the socket only
    connection.send(std::move(reply), fd);
}

void NscdServer::on_request(RequestConnection& connection, std::span<const uint8_t> request) {
    RequestHeader header;
    std::memcpy(&header, request.data(), sizeof header);
    std::vector<uint8_t> key(request.begin() + sizeof header, request.end());
    const auto type = static_cast<RequestType>(header.type);
    // The daemon's own NSS calls (the proxy's threads, an NSS module resolving a server name)
    // must never be answered by the daemon: glibc asks nscd first in every process, this one
    // included. "Not served here" makes glibc ask NSS itself.
    const bool self = connection.peer_pid() == getpid();
    if (type == GETFDHST) {
        std::string name;
        if (self || !string_key(key, name) || name != "hosts") {
            connection.send({});
        } else {
            send_map(connection);
        }
        return;
    }
    if (is_host_type(type)) {
        if (self) {
            connection.send(type == GETAI ? std::vector<uint8_t>{} : host_disabled_reply());
            return;
        }
        bump(counters_.nscd_requests);
        start_host_lookup(&connection, type, std::move(key), kRefreshes, false, {});
        return;
    }
    if (is_other_type(type)) {
        users_.on_request(connection, type, std::move(key), self);
        return;
    }
    if (type == GETFDPW || type == GETFDGR || type == GETFDSERV || type == GETFDNETGR) {
        std::string name;
        int fd = -1;
        std::vector<uint8_t> reply;
        if (!self && string_key(key, name)) reply = users_.fd_reply(type, name, fd);
        connection.send(std::move(reply), fd);
        return;
    }
    if (type == INVALIDATE) {
        std::string name;
        if (connection.peer_uid() != 0 || !string_key(key, name)) {
            connection.send({});
            return;
        }
        // Other names (netgroup): nothing cached, nothing to flush.
        if (name == "hosts") {
            flush_map();
        } else {
            users_.invalidate(name);
        }
        const int32_t done = 0;
        const auto* b = reinterpret_cast<const uint8_t*>(&done);
        connection.send(std::vector<uint8_t>(b, b + sizeof done));
        return;
    }
    // SHUTDOWN, GETSTAT, GETFD of other databases (no map: the client then uses the socket
    // for them), unknown types: closed without a reply, as nscd does.
    connection.send({});
}

void NscdServer::on_close(RequestConnection& connection) {
    // A client that hung up (or timed out) before its passwd or group lookup ran: a flood of
    // such requests runs no lookups.
    users_.on_close(connection);
}

void NscdServer::start_host_lookup(RequestConnection* connection, RequestType type,
                                   std::vector<uint8_t> key, uint32_t refreshes_left, bool refresh,
                                   const std::string& refresh_name) {
    hostdb::HostQuery q;
    q.refresh = refresh;
    switch (type) {
        case GETHOSTBYNAME:
        case GETHOSTBYNAMEv6:
        case GETAI:
            if (!string_key(key, q.name)) {
                if (connection != nullptr) connection->send({});
                return;
            }
            q.family = type == GETHOSTBYNAME ? kAfInet : type == GETHOSTBYNAMEv6 ? kAfInet6 : 0;
            if (refresh) q.name = refresh_name;
            break;
        case GETHOSTBYADDR:
        case GETHOSTBYADDRv6:
            // The client sends exactly 4 or 16 bytes; anything else is no request of its.
            if (key.size() != (type == GETHOSTBYADDR ? 4u : 16u)) {
                if (connection != nullptr) connection->send({});
                return;
            }
            q.by_addr = true;
            q.family = type == GETHOSTBYADDR ? kAfInet : kAfInet6;
            std::memcpy(q.address.data(), key.data(), key.size());
            break;
        default:
            return;
    }
    RequestId id;
    Request* r = requests_.add(id);
    if (r == nullptr) {
        if (connection != nullptr) connection->send({});
        return;
    }
    r->connection_id = connection != nullptr ? connection->id() : kNoConnection;
    r->type = type;
    r->key = std::move(key);
    r->flushes = flushes_;
    r->refreshes_left = refreshes_left;
    // A client's lookup counts against its uid until it ends (its client may hang up); the
    // prefetches share one user's worth between them.
    const uid_t uid = connection != nullptr ? connection->peer_uid() : front::HostFront::kNoUser;
    if (auto answer = front_.lookup(*this, q, id, uid)) answer_host(id, *answer);
}

void NscdServer::host_done(uint64_t cookie, const hostdb::HostAnswer& answer) {
    if (requests_.find(cookie) != nullptr) answer_host(cookie, answer);
}

void NscdServer::answer_host(RequestId id, const hostdb::HostAnswer& answer) {
    Request r = std::move(*requests_.find(id));
    requests_.remove(id);
    RequestConnection* connection =
        r.connection_id != kNoConnection ? socket_.find(r.connection_id) : nullptr;
    std::vector<uint8_t> reply;
    switch (answer.status) {
        case hostdb::HostStatus::Found:
        case hostdb::HostStatus::NotFound:
            reply = r.type == GETAI ? ai_reply(answer) : host_reply(r.type, answer);
            break;
        case hostdb::HostStatus::NoData:
            // getaddrinfo reads any negative GETAI reply as EAI_NONAME, where glibc's dns
            // module says EAI_NODATA: no reply, and the client asks NSS itself.
            if (r.type != GETAI) reply = host_reply(r.type, answer);
            break;
        case hostdb::HostStatus::TryAgain:
            // Never an authoritative "not found" for a failure: no reply, the client falls
            // back to its NSS modules (and leaves nscd alone for its next 100 lookups).
            break;
    }
    if (!reply.empty() && answer.ttl > 0 && r.flushes == flushes_) {
        // A refresh that found the name gone leaves the old record to expire on time.
        const bool publish = r.connection_id != kNoConnection || answer.found();
        const bool published = publish && map_.publish(r.type, r.key, reply, answer.ttl);
        if (published) {
            if (options_.prefetch && answer.found() && !answer.from_hosts_file) {
                schedule_refresh(r, answer);
            }
        }
        set_levels();
    }
    if (connection != nullptr) connection->send(std::move(reply));
}

void NscdServer::schedule_refresh(const Request& r, const hostdb::HostAnswer& answer) {
    if (r.refreshes_left == 0 || answer.ttl < kMinRefreshTtl) return;
    const uint64_t expires = map_.expiry_of(r.type, r.key);
    const uint64_t lead = std::max<uint64_t>(1000, uint64_t{answer.ttl} * 100);
    const RequestType type = r.type;
    std::vector<uint8_t> key = r.key;
    const uint32_t left = r.refreshes_left - 1;
    const uint64_t flushes = flushes_;
    std::string name = answer.answered_name;
    // One timer per key, replaced: every request on the socket comes here, and a timer per
    // request would hold its memory until the record's TTL runs out (audit item 3).
    std::string timer_key = MapWriter::index_key(type, key);
    auto [slot, added] = refresh_timers_.try_emplace(timer_key, EventLoop::kNoTimer);
    if (!added) loop_.cancel_timer(slot->second);
    slot->second = loop_.add_timer(expires - lead, [this, type, key, left, expires, flushes, name,
                                                    timer_key = std::move(timer_key)]() mutable {
        refresh_timers_.erase(timer_key);
        set_levels();
        // Only while that very record is still the one published.
        if (flushes != flushes_ || map_.expiry_of(type, key) != expires) return;
        if (type != GETHOSTBYADDR && type != GETHOSTBYADDRv6 && name.empty()) return;
        start_host_lookup(nullptr, type, std::move(key), left, true, name);
    });
}

}  // namespace nscache::nscd
