// SPDX-License-Identifier: BSD-3-Clause
#include "nssd/nss_server.h"

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

NssServer::NssServer(front::HostFront& front, NssOptions options)
    : front_(front),
      counters_(front.counters()),
      loop_(front.loop()),
      options_(std::move(options)),
      requests_(kMaxRequests),
      socket_(front.loop(), *this,
              front::RequestSocketOptions{.path = options_.socket_path,
                                          .what = "NSS socket",
                                          .max_connections = kMaxConnections,
                                          .timeout_ms = kConnectionTimeoutMs,
                                          .max_per_user = options_.max_connections_per_user,
                                          .inherited_fd = options_.inherited_fd}) {
    front.add(*this, options_.max_connections_per_user);
}

NssServer::~NssServer() {
    socket_.close_clients();
    map_.close();
}

Result<void> NssServer::open() {
    if (auto bound = socket_.bind(); !bound) return bound;
    if (!socket_.inherited()) {
        if (auto listening = socket_.listen(256); !listening) return listening;
    }
    if (auto error = map_.create()) return Error{*error};
    log_info("NSS socket %s", options_.socket_path.c_str());
    return {};
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
    // Counted against the client's uid until it ends, even once the client has hung up.
    if (auto result = front_.lookup(*this, q, id, connection.peer_uid())) finish(id, *result);
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
    if (RequestConnection* connection = socket_.find(connection_id)) {
        answer(*connection, status, family, result.ttl, payload);
    }
}

}  // namespace nscache::nssd
