// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/nss_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/bytes.h"
#include "common/log.h"

namespace nscache::nssd {
namespace {

constexpr size_t kMaxConnections = NssServer::kMaxConnections;
// One request per connection, plus those of connections that timed out while the resolver
// still works on them (it answers within its own timeout, well before the connection's).
constexpr size_t kMaxRequests = 2 * kMaxConnections;
constexpr uint64_t kConnectionTimeoutMs = 10'000;
constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;

}  // namespace

NssServer::NssServer(upstream::ResolverShared& resolver, WorkerCounters& counters,
                     uint32_t worker_index, NssOptions options,
                     upstream::ForwardingSettingsPtr settings)
    : counters_(counters),
      options_(std::move(options)),
      settings_(std::move(settings)),
      lookup_(worker_index, loop_, resolver, counters, *this, settings_->routing, options_.lookup),
      connections_(loop_, *this, kMaxConnections, kConnectionTimeoutMs,
                   options_.max_connections_per_user),
      requests_(kMaxRequests) {}

NssServer::~NssServer() {
    stop();
    listener_.reset();
    connections_.clear();
    if (listen_fd_ >= 0) {
        close(listen_fd_);
        unlink(options_.socket_path.c_str());
    }
    map_.close();
}

std::optional<std::string> NssServer::open() {
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (options_.socket_path.size() >= sizeof addr.sun_path) {
        return "NSS socket path too long: " + options_.socket_path;
    }
    std::memcpy(addr.sun_path, options_.socket_path.c_str(), options_.socket_path.size() + 1);
    unlink(options_.socket_path.c_str());
    listen_fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (listen_fd_ < 0) return std::string("cannot create the NSS socket: ") + std::strerror(errno);
    // Every local user resolves names, as through /etc/resolv.conf: the socket is born 0666.
    // The mode comes from the umask, never from chmod() by path, which root would follow
    // through a symlink planted in a folder another user owns. open() runs at startup, before
    // the daemon starts its threads, so the process-wide umask changes nothing else.
    const mode_t old_mask = umask(0111);
    const bool bound = bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    const int bind_errno = errno;
    umask(old_mask);
    if (!bound || listen(listen_fd_, 256) != 0) {
        return "cannot bind NSS socket " + options_.socket_path + ": " +
               std::strerror(bound ? errno : bind_errno);
    }
    if (auto error = map_.create()) return error;
    log_info("NSS socket %s", options_.socket_path.c_str());
    return std::nullopt;
}

void NssServer::start() {
    listener_ = std::make_unique<Listener>(
        loop_, listen_fd_, "NSS socket",
        [this](int fd, const sockaddr_storage&, socklen_t) { connections_.adopt(fd); });
    listener_->start();
    thread_ = std::thread([this] {
        loop_.refresh_now();
        lookup_.apply(settings_->routing, settings_->resolver);
        // The daemon answers /etc/hosts itself; an edit voids what the map holds.
        lookup_.open([this] { map_.invalidate_all(); });
        loop_.run([this] {
            adopt_posted_settings();
            lookup_.drain();
        });
    });
}

void NssServer::adopt_posted_settings() {
    if (upstream::ForwardingSettingsPtr next; mailbox_.take_latest(next)) {
        lookup_.apply(next->routing, next->resolver);
        settings_ = std::move(next);
    }
}

void NssServer::stop() {
    if (!thread_.joinable()) return;
    loop_.request_stop();
    thread_.join();
}

size_t NssServer::request_size(std::span<const uint8_t> in) const {
    nscache_nss_request header;
    if (in.size() < sizeof header) return 0;
    std::memcpy(&header, in.data(), sizeof header);
    if (header.magic != NSCACHE_NSS_REQUEST_MAGIC || header.version != NSCACHE_NSS_VERSION ||
        header.data_len > NSCACHE_NSS_MAX_DATA) {
        return kInvalid;
    }
    return sizeof header + header.data_len;
}

void NssServer::answer(RequestConnection& connection, uint16_t status, int32_t family, uint32_t ttl,
                       std::span<const uint8_t> payload, int pass_fd) {
    nscache_nss_response header{};
    header.magic = NSCACHE_NSS_RESPONSE_MAGIC;
    header.version = NSCACHE_NSS_VERSION;
    header.status = status;
    header.family = family;
    header.ttl = ttl;
    header.payload_len = static_cast<uint32_t>(payload.size());
    header.map_id = map_.id();
    std::vector<uint8_t> bytes(sizeof header + payload.size());
    std::memcpy(bytes.data(), &header, sizeof header);
    copy_bytes(bytes.data() + sizeof header, payload.data(), payload.size());
    connection.send(std::move(bytes), pass_fd);
}

void NssServer::send_map(RequestConnection& connection) {
    if (map_.fd() < 0) {
        answer(connection, NSCACHE_NSS_UNAVAIL, 0, 0, {});
        return;
    }
    uint8_t size[8];
    const uint64_t bytes = map_.size();
    std::memcpy(size, &bytes, sizeof size);
    answer(connection, NSCACHE_NSS_FOUND, 0, 0, size, map_.fd());
}

void NssServer::on_request(RequestConnection& connection, std::span<const uint8_t> request) {
    nscache_nss_request header;
    std::memcpy(&header, request.data(), sizeof header);
    const std::span<const uint8_t> data = request.subspan(sizeof header);
    // Once per process that resolves names (and per daemon it sees): not a lookup.
    if (header.op == NSCACHE_NSS_GET_MAP && data.empty()) {
        send_map(connection);
        return;
    }
    bump(counters_.nss_requests);
    RequestId id;
    Request* r = requests_.add(id);
    if (r == nullptr) {
        answer(connection, NSCACHE_NSS_TRYAGAIN, header.family, 0, {});
        return;
    }
    r->connection_id = connection.id();
    r->family = header.family;

    hostdb::HostQuery q;
    q.search = false;  // the module runs the search list
    q.family = header.family;
    bool valid = false;
    if (header.op == NSCACHE_NSS_BY_NAME) {
        q.name.assign(data.begin(), data.end());
        while (!q.name.empty() && q.name.back() == '.') q.name.pop_back();
        valid = !q.name.empty() && q.name.find('\0') == std::string::npos &&
                (header.family == kAfInet || header.family == kAfInet6 || header.family == 0);
    } else if (header.op == NSCACHE_NSS_BY_ADDR &&
               ((header.family == kAfInet && data.size() == 4) ||
                (header.family == kAfInet6 && data.size() == 16))) {
        q.by_addr = true;
        std::memcpy(q.address.data(), data.data(), data.size());
        valid = true;
    }
    if (!valid) {
        requests_.remove(id);
        answer(connection, NSCACHE_NSS_UNAVAIL, header.family, 0, {});
        return;
    }
    r->key.resize(NSCACHE_MAP_KEY_MAX);
    r->key.resize(
        nscache_map_key(r->key.data(), header.op, header.family, data.data(), data.size()));
    // Read before any cache lookup: a flush from here on must invalidate what this request
    // publishes, since its answer may be from before the flush.
    r->map_generation = map_.generation();
    if (auto result = lookup_.start(q, id)) finish(id, *result);
}

void NssServer::host_done(uint64_t cookie, const hostdb::HostAnswer& answer) {
    if (requests_.find(cookie) != nullptr) finish(cookie, answer);
}

void NssServer::finish(RequestId id, const hostdb::HostAnswer& result) {
    Request& r = *requests_.find(id);
    const uint16_t status = nss_status(result);
    const std::vector<uint8_t> payload = encode_payload(result);
    map_.publish(r.key, status, result.ttl, payload, static_cast<int64_t>(loop_.now_ms()),
                 r.map_generation);
    const int32_t family = r.family;
    const uint64_t connection_id = r.connection_id;
    requests_.remove(id);
    if (RequestConnection* connection = connections_.find(connection_id)) {
        answer(*connection, status, family, result.ttl, payload);
    }
}

}  // namespace nscache::nssd
