#include "server/nss_server.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "cache/render.h"
#include "common/bytes.h"
#include "common/log.h"
#include "dns/name.h"
#include "dns/query.h"

namespace nscache::server {
namespace {

constexpr size_t kMaxConnections = 4096;
// One request per connection, plus those of connections that timed out while the resolver
// still works on them (it answers within its own timeout, well before the connection's).
constexpr size_t kMaxRequests = 2 * kMaxConnections;
constexpr uint64_t kConnectionTimeoutMs = 10'000;
// How long the listener is left alone when no descriptor is free to accept with.
constexpr uint64_t kListenerPauseMs = 100;
constexpr int kAfInet = 2;
constexpr int kAfInet6 = 10;
constexpr size_t kMaxAnswer = 65535;

// A DNS query made up for the cache's renderer: no EDNS, RD set, ID 0.
struct SyntheticQuery {
    uint8_t question[dns::kMaxNameLength + 4];
    size_t length = 0;

    SyntheticQuery(dns::Bytes name, uint16_t qtype) {
        std::memcpy(question, name.data(), name.size());
        dns::write_u16(question + name.size(), qtype);
        dns::write_u16(question + name.size() + 2, dns::kClassIN);
        length = name.size() + 4;
    }
    dns::Query query() const {
        dns::Query q;
        q.header.flags = dns::flag::RD;
        q.header.qdcount = 1;
        q.question = dns::Bytes(question, length);
        q.qname = dns::Bytes(question, length - 4);
        q.qtype = dns::read_u16(question + length - 4);
        q.qclass = dns::kClassIN;
        return q;
    }
};

// A resolver cookie: the request's id with the part (0 or 1) in the low bit of its slot
// index. Slot indexes stay below kMaxRequests, far below 2^31.
uint64_t cookie_of(uint64_t request_id, size_t part) {
    return (request_id >> 32) << 32 | (request_id & 0xFFFFFFFFu) << 1 | part;
}
uint64_t request_of(uint64_t cookie) {
    return (cookie >> 32) << 32 | (cookie & 0xFFFFFFFFu) >> 1;
}

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

class NssServer::Acceptor final : public EventHandler {
  public:
    explicit Acceptor(NssServer& server) : server_(server) {}
    void on_event(uint32_t) override { server_.accept_connections(); }

  private:
    NssServer& server_;
};

NssServer::NssServer(ServerShared& shared, WorkerCounters& counters, uint32_t worker_index,
                     NssOptions options, SettingsPtr settings)
    : shared_(shared),
      counters_(counters),
      options_(std::move(options)),
      queue_(loop_),
      settings_(std::move(settings)),
      resolver_(worker_index, loop_, shared.resolver, *this, counters, settings_->routing),
      connections_(kMaxConnections),
      requests_(kMaxRequests),
      scratch_(kMaxAnswer) {}

NssServer::~NssServer() {
    stop();
    connections_.clear();
    graveyard_.clear();
    if (listen_fd_ >= 0) {
        close(listen_fd_);
        unlink(options_.socket_path.c_str());
    }
    if (spare_fd_ >= 0) close(spare_fd_);
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
    // Held in reserve for running out of descriptors (accept_connections).
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (auto error = map_.create()) return error;
    log_info("NSS socket %s", options_.socket_path.c_str());
    return std::nullopt;
}

void NssServer::start() {
    acceptor_ = std::make_unique<Acceptor>(*this);
    loop_.add(listen_fd_, EPOLLIN, acceptor_.get(), listener_);
    resolver_.apply(settings_->routing, settings_->resolver);
    thread_ = std::thread([this] {
        loop_.run([this] {
            adopt_posted_settings();
            queue_.drain(*this);
        });
    });
}

void NssServer::adopt_posted_settings() {
    if (SettingsPtr next = mailbox_.take()) {
        resolver_.apply(next->routing, next->resolver);
        settings_ = std::move(next);
    }
}

void NssServer::stop() {
    if (!thread_.joinable()) return;
    loop_.request_stop();
    thread_.join();
}

void NssServer::accept_connections() {
    for (int i = 0; i < 64; ++i) {
        const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED) continue;
            if (errno == EAGAIN) return;
            // Out of descriptors (EMFILE, ENFILE) or kernel memory: the connection stays in
            // the backlog and the listener stays readable, which on a level-triggered loop
            // would spin this thread at full speed until a descriptor frees up.
            log_warning_limited("NSS socket: cannot accept a connection: %s", std::strerror(errno));
            if (!shed_connection()) {
                pause_listener();
                return;
            }
            continue;
        }
        uint64_t id;
        std::unique_ptr<NssConnection>* slot = connections_.add(id);
        if (slot == nullptr) {  // kMaxConnections open already
            close(fd);
            continue;
        }
        *slot = std::make_unique<NssConnection>(*this, loop_, fd, id);
        if (!(*slot)->start()) connections_.remove(id);  // the destructor closes fd
    }
}

bool NssServer::shed_connection() {
    if (spare_fd_ < 0) return false;
    // The spare descriptor makes room to accept the waiting client and close it at once: it
    // sees its connection closed (and tries again, or asks dns) instead of waiting.
    close(spare_fd_);
    const int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) close(fd);
    spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);  // another thread may win it
    return fd >= 0 && spare_fd_ >= 0;
}

void NssServer::pause_listener() {
    if (listener_paused_) return;
    listener_paused_ = true;
    loop_.modify(listener_, 0);
    loop_.add_timer(loop_.now_ms() + kListenerPauseMs, [this] {
        listener_paused_ = false;
        if (spare_fd_ < 0) spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        loop_.modify(listener_, EPOLLIN);
    });
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
    r->op = header.op;
    r->family = header.family;

    bool valid = false;
    if (header.op == NSCACHE_NSS_BY_NAME) {
        std::string text(data.begin(), data.end());
        auto name = dns::name_from_text(text);
        if (name && (header.family == kAfInet || header.family == kAfInet6 || header.family == 0)) {
            dns::lower_name(name->view(), r->question.name);
            if (header.family != kAfInet6) r->parts.push_back(Part{dns::rtype::A, false, {}});
            if (header.family != kAfInet) r->parts.push_back(Part{dns::rtype::AAAA, false, {}});
            valid = true;
        }
    } else if (header.op == NSCACHE_NSS_BY_ADDR &&
               ((header.family == kAfInet && data.size() == 4) ||
                (header.family == kAfInet6 && data.size() == 16))) {
        const std::vector<uint8_t> reverse = reverse_name(header.family, data.data());
        std::memcpy(r->question.name.bytes, reverse.data(), reverse.size());
        r->question.name.length = static_cast<uint8_t>(reverse.size());
        r->parts.push_back(Part{dns::rtype::PTR, false, {}});
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
    r->question.qclass = dns::kClassIN;
    // Read before any cache lookup: a flush from here on must invalidate what this request
    // publishes, since its answer may be from before the flush.
    r->map_generation = map_.generation();
    const size_t parts = r->parts.size();
    for (size_t i = 0; i < parts; ++i) {
        lookup_part(id, i);
        // A part answered from the cache may have finished (and removed) the request.
        if (requests_.find(id) == nullptr) return;
    }
}

void NssServer::lookup_part(RequestId id, size_t part) {
    Request& r = *requests_.find(id);
    upstream::Question question = r.question;
    question.qtype = r.parts[part].qtype;
    const SyntheticQuery synthetic(question.name.view(), question.qtype);
    const dns::Query q = synthetic.query();
    const cache::RenderLimits limits{kMaxAnswer, 1232};
    const auto hit =
        shared_.cache.lookup(question.cache_key(), q, loop_.now_ms(), limits, scratch_, false);
    if (hit.freshness == cache::Freshness::Fresh) {
        part_done(id, part, std::span<const uint8_t>(scratch_.data(), hit.length));
        return;
    }
    // A question no upstream answered a moment ago (RFC 9520 §3.2): TRYAGAIN at once, so the
    // next NSS module in nsswitch.conf gets its turn without a wait.
    if (resolver_.failing(question, nullptr) || !resolver_.resolve(question, cookie_of(id, part))) {
        part_done(id, part, {});
    }
}

void NssServer::deliver(uint64_t cookie, const upstream::ResolveOutcome& outcome) {
    const RequestId id = request_of(cookie);
    const size_t part = cookie & 1;
    Request* r = requests_.find(id);
    if (r == nullptr || part >= r->parts.size()) return;
    size_t length = 0;
    if (outcome.answer) {
        const SyntheticQuery synthetic(r->question.name.view(), r->parts[part].qtype);
        bool truncated = false;
        length = cache::render_answer(outcome.answer->view(), synthetic.query(), 0, false,
                                      cache::RenderLimits{kMaxAnswer, 1232}, scratch_, &truncated);
    }
    part_done(id, part, std::span<const uint8_t>(scratch_.data(), length));
}

void NssServer::part_done(RequestId id, size_t part, std::span<const uint8_t> answer) {
    Request& r = *requests_.find(id);
    r.parts[part].done = true;
    r.parts[part].result = hosts_result_from_answer(dns::Bytes(answer.data(), answer.size()),
                                                    r.question.name.view(), r.parts[part].qtype);
    for (const Part& p : r.parts) {
        if (!p.done) return;
    }
    finish(id);
}

void NssServer::finish(RequestId id) {
    Request& r = *requests_.find(id);
    const HostsResult result = r.parts.size() == 2
                                   ? combine_results(r.parts[0].result, r.parts[1].result)
                                   : r.parts[0].result;
    const std::vector<uint8_t> payload = encode_payload(result);
    map_.publish(r.key, result.status, result.ttl, payload, static_cast<int64_t>(loop_.now_ms()),
                 r.map_generation);
    const int32_t family = r.family;
    const uint64_t connection_id = r.connection_id;
    requests_.remove(id);
    if (std::unique_ptr<NssConnection>* connection = connections_.find(connection_id)) {
        answer(**connection, result.status, family, result.ttl, payload);
    }
}

}  // namespace nscache::server
