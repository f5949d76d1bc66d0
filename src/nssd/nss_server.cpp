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

constexpr size_t kMaxConnections = 4096;
// One request per connection, plus those of connections that timed out while the resolver
// still works on them (it answers within its own timeout, well before the connection's).
constexpr size_t kMaxRequests = 2 * kMaxConnections;
constexpr uint64_t kConnectionTimeoutMs = 10'000;
constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;

}  // namespace

// One client of the NSS socket: reads one request, waits for its answer, writes it, closes.
class NssConnection final : public EventHandler {
  public:
    NssConnection(NssServer& server, EventLoop& loop, int fd, uint64_t id)
        : server_(server), loop_(loop), fd_(fd), id_(id) {}
    ~NssConnection() {
        loop_.cancel_timer(timer_);
        if (fd_ >= 0) {
            if (registered_) loop_.remove(registration_);
            close(fd_);
        }
    }

    uint64_t id() const { return id_; }

    bool start() {
        if (!loop_.add(fd_, EPOLLIN, this, registration_)) return false;
        registered_ = true;
        timer_ = loop_.add_timer(loop_.now_ms() + kConnectionTimeoutMs, [this] {
            timer_ = EventLoop::kNoTimer;
            shut();
        });
        return true;
    }

    void on_event(uint32_t events) override {
        if (fd_ < 0) return;
        if (events & (EPOLLERR | EPOLLHUP)) {
            shut();
            return;
        }
        if (writing_) {
            write_out();
            return;
        }
        read_in();
    }

    // Writes `bytes`, then closes. `pass_fd` (if not -1) rides on the first byte as
    // SCM_RIGHTS; the caller keeps owning it.
    void send(std::vector<uint8_t> bytes, int pass_fd = -1) {
        out_ = std::move(bytes);
        pass_fd_ = pass_fd;
        writing_ = true;
        write_out();
    }

  private:
    void read_in() {
        uint8_t buffer[2048];
        const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        if (n <= 0) {
            shut();
            return;
        }
        in_.insert(in_.end(), buffer, buffer + n);
        if (in_.size() < sizeof(nscache_nss_request)) return;
        nscache_nss_request header;
        std::memcpy(&header, in_.data(), sizeof header);
        if (header.magic != NSCACHE_NSS_REQUEST_MAGIC || header.version != NSCACHE_NSS_VERSION ||
            header.data_len > NSCACHE_NSS_MAX_DATA) {
            shut();
            return;
        }
        const size_t total = sizeof header + header.data_len;
        if (in_.size() < total) return;
        if (in_.size() > total) {  // one request per connection
            shut();
            return;
        }
        loop_.modify(registration_, 0);  // nothing more to read; the answer re-arms
        server_.on_request(*this, header,
                           std::span<const uint8_t>(in_.data() + sizeof header, header.data_len));
    }

    ssize_t send_some() {
        if (pass_fd_ < 0) {
            return ::send(fd_, out_.data() + offset_, out_.size() - offset_, MSG_NOSIGNAL);
        }
        iovec iov{out_.data() + offset_, out_.size() - offset_};
        alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
        msghdr msg{};
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control;
        msg.msg_controllen = sizeof control;
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(c), &pass_fd_, sizeof(int));
        const ssize_t n = sendmsg(fd_, &msg, MSG_NOSIGNAL);
        if (n > 0) pass_fd_ = -1;  // sent with the first byte
        return n;
    }

    void write_out() {
        while (offset_ < out_.size()) {
            const ssize_t n = send_some();
            if (n < 0 && errno == EINTR) continue;
            if (n < 0 && errno == EAGAIN) {
                loop_.modify(registration_, EPOLLOUT);
                return;
            }
            if (n <= 0) break;
            offset_ += static_cast<size_t>(n);
        }
        shut();
    }

    void shut() {
        if (fd_ < 0) return;
        loop_.cancel_timer(timer_);
        loop_.remove(registration_);
        close(fd_);
        fd_ = -1;
        server_.release(this);
    }

    NssServer& server_;
    EventLoop& loop_;
    int fd_;
    const uint64_t id_;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    bool registered_ = false;
    EventLoop::TimerHandle timer_ = EventLoop::kNoTimer;
    std::vector<uint8_t> in_;
    std::vector<uint8_t> out_;
    size_t offset_ = 0;
    int pass_fd_ = -1;
    bool writing_ = false;
};

NssServer::NssServer(upstream::ResolverShared& resolver, WorkerCounters& counters,
                     uint32_t worker_index, NssOptions options, server::SettingsPtr settings)
    : counters_(counters),
      options_(std::move(options)),
      settings_(std::move(settings)),
      lookup_(worker_index, loop_, resolver, counters, *this, settings_->routing, options_.lookup),
      connections_(kMaxConnections),
      requests_(kMaxRequests) {}

NssServer::~NssServer() {
    stop();
    listener_.reset();
    connections_.clear();
    graveyard_.clear();
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
        [this](int fd, const sockaddr_storage&, socklen_t) { adopt_connection(fd); });
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
    if (server::SettingsPtr next = mailbox_.take()) {
        lookup_.apply(next->routing, next->resolver);
        settings_ = std::move(next);
    }
}

void NssServer::stop() {
    if (!thread_.joinable()) return;
    loop_.request_stop();
    thread_.join();
}

void NssServer::adopt_connection(int fd) {
    uint64_t id;
    std::unique_ptr<NssConnection>* slot = connections_.add(id);
    if (slot == nullptr) {  // kMaxConnections open already
        close(fd);
        return;
    }
    *slot = std::make_unique<NssConnection>(*this, loop_, fd, id);
    if (!(*slot)->start()) connections_.remove(id);  // the destructor closes fd
}

void NssServer::release(NssConnection* connection) {
    std::unique_ptr<NssConnection>* slot = connections_.find(connection->id());
    if (slot == nullptr) return;
    // Destroyed on the loop's next turn: the connection is still running this call.
    graveyard_.push_back(std::move(*slot));
    connections_.remove(connection->id());
    if (graveyard_.size() == 1) loop_.add_timer(0, [this] { graveyard_.clear(); });
}

void NssServer::answer(NssConnection& connection, uint16_t status, int32_t family, uint32_t ttl,
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

void NssServer::send_map(NssConnection& connection) {
    if (map_.fd() < 0) {
        answer(connection, NSCACHE_NSS_UNAVAIL, 0, 0, {});
        return;
    }
    uint8_t size[8];
    const uint64_t bytes = map_.size();
    std::memcpy(size, &bytes, sizeof size);
    answer(connection, NSCACHE_NSS_FOUND, 0, 0, size, map_.fd());
}

void NssServer::on_request(NssConnection& connection, const nscache_nss_request& header,
                           std::span<const uint8_t> data) {
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
    if (std::unique_ptr<NssConnection>* connection = connections_.find(connection_id)) {
        answer(**connection, status, family, result.ttl, payload);
    }
}

}  // namespace nscache::nssd
