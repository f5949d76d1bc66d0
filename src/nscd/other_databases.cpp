// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/other_databases.h"

#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <sys/types.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/bytes.h"

namespace nscache::nscd {
namespace {

// Lookups waiting for a pool thread, in all and per user; past these a client gets no reply
// and asks NSS itself. A user's share is well below the total (as its connections are: an
// eighth, common/request_connection.h).
constexpr size_t kMaxQueued = 1024;
constexpr size_t kMaxQueuedPerUser = 64;
constexpr size_t kMaxBuffer = 1u << 20;

void append(std::vector<uint8_t>& out, const void* p, size_t n) {
    const size_t at = out.size();
    out.resize(at + n);
    copy_bytes(out.data() + at, p, n);
}

void append_string(std::vector<uint8_t>& out, const char* s) {
    append(out, s, std::strlen(s) + 1);
}

template <typename Header>
std::vector<uint8_t> header_only(const Header& h) {
    std::vector<uint8_t> out;
    append(out, &h, sizeof h);
    return out;
}

// A string key as the client sends it: its bytes up to the NUL it must end with.
bool key_string(const std::vector<uint8_t>& key, std::string& out) {
    if (key.empty() || key.back() != 0) return false;
    out.assign(reinterpret_cast<const char*>(key.data()), key.size() - 1);
    return out.find('\0') == std::string::npos;
}

bool parse_number(const std::string& s, unsigned long& out) {
    if (s.empty() || s.size() > 10) return false;
    char* end = nullptr;
    errno = 0;
    out = std::strtoul(s.c_str(), &end, 10);
    return errno == 0 && end != nullptr && *end == '\0';
}

// Runs `call(buffer, size)` -> errno-style code with a buffer that grows on ERANGE.
template <typename Call>
int with_buffer(std::vector<char>& buffer, Call call) {
    buffer.resize(1024);
    for (;;) {
        const int rc = call(buffer.data(), buffer.size());
        if (rc != ERANGE || buffer.size() >= kMaxBuffer) return rc;
        buffer.resize(buffer.size() * 2);
    }
}

std::vector<uint8_t> passwd_reply(RequestType type, const std::string& key) {
    passwd pw{};
    passwd* result = nullptr;
    std::vector<char> buffer;
    unsigned long uid = 0;
    if (type == GETPWBYUID && !parse_number(key, uid)) {
        return header_only(PwResponseHeader{kProtocolVersion, 0, 0, 0, 0, 0, 0, 0, 0});
    }
    const int rc = with_buffer(buffer, [&](char* b, size_t n) {
        return type == GETPWBYNAME ? getpwnam_r(key.c_str(), &pw, b, n, &result)
                                   : getpwuid_r(static_cast<uid_t>(uid), &pw, b, n, &result);
    });
    if (result == nullptr) {
        // Not found is an answer; a failure (a module unreachable) is no reply at all.
        if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) return {};
        return header_only(PwResponseHeader{kProtocolVersion, 0, 0, 0, 0, 0, 0, 0, 0});
    }
    PwResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.pw_name_len = static_cast<int32_t>(std::strlen(pw.pw_name) + 1);
    h.pw_passwd_len = static_cast<int32_t>(std::strlen(pw.pw_passwd) + 1);
    h.pw_uid = pw.pw_uid;
    h.pw_gid = pw.pw_gid;
    h.pw_gecos_len = static_cast<int32_t>(std::strlen(pw.pw_gecos) + 1);
    h.pw_dir_len = static_cast<int32_t>(std::strlen(pw.pw_dir) + 1);
    h.pw_shell_len = static_cast<int32_t>(std::strlen(pw.pw_shell) + 1);
    std::vector<uint8_t> out = header_only(h);
    for (const char* s : {pw.pw_name, pw.pw_passwd, pw.pw_gecos, pw.pw_dir, pw.pw_shell}) {
        append_string(out, s);
    }
    return out;
}

std::vector<uint8_t> group_reply(RequestType type, const std::string& key) {
    group gr{};
    group* result = nullptr;
    std::vector<char> buffer;
    unsigned long gid = 0;
    if (type == GETGRBYGID && !parse_number(key, gid)) {
        return header_only(GrResponseHeader{kProtocolVersion, 0, 0, 0, 0, 0});
    }
    const int rc = with_buffer(buffer, [&](char* b, size_t n) {
        return type == GETGRBYNAME ? getgrnam_r(key.c_str(), &gr, b, n, &result)
                                   : getgrgid_r(static_cast<gid_t>(gid), &gr, b, n, &result);
    });
    if (result == nullptr) {
        if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) return {};
        return header_only(GrResponseHeader{kProtocolVersion, 0, 0, 0, 0, 0});
    }
    GrResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.gr_name_len = static_cast<int32_t>(std::strlen(gr.gr_name) + 1);
    h.gr_passwd_len = static_cast<int32_t>(std::strlen(gr.gr_passwd) + 1);
    h.gr_gid = gr.gr_gid;
    int32_t members = 0;
    while (gr.gr_mem[members] != nullptr) ++members;
    h.gr_mem_cnt = members;
    std::vector<uint8_t> out = header_only(h);
    for (int32_t i = 0; i < members; ++i) {
        const auto len = static_cast<uint32_t>(std::strlen(gr.gr_mem[i]) + 1);
        append(out, &len, sizeof len);
    }
    append_string(out, gr.gr_name);
    append_string(out, gr.gr_passwd);
    for (int32_t i = 0; i < members; ++i) append_string(out, gr.gr_mem[i]);
    return out;
}

std::vector<gid_t> group_list(const std::string& user, gid_t forced) {
    std::vector<gid_t> groups(64);
    for (int tries = 0; tries < 8; ++tries) {
        int n = static_cast<int>(groups.size());
        if (getgrouplist(user.c_str(), forced, groups.data(), &n) >= 0) {
            groups.resize(static_cast<size_t>(n));
            return groups;
        }
        groups.resize(static_cast<size_t>(n) > groups.size() ? static_cast<size_t>(n)
                                                             : groups.size() * 2);
    }
    return {};
}

// The supplementary groups NSS gives the user (initgroups_dyn), without the group the caller
// passes in (the client adds it itself). getgrouplist always lists the group it is given,
// so it is asked with two different ones and only the groups of both lists are real.
std::vector<uint8_t> initgroups_reply(const std::string& user) {
    const std::vector<gid_t> with0 = group_list(user, 0);
    const std::vector<gid_t> with1 = group_list(user, 1);
    std::vector<int32_t> groups;
    for (gid_t g : with0) {
        bool in_both = false;
        for (gid_t o : with1) in_both = in_both || o == g;
        if (in_both) groups.push_back(static_cast<int32_t>(g));
    }
    InitgrResponseHeader h{kProtocolVersion, 1, static_cast<int32_t>(groups.size())};
    std::vector<uint8_t> out = header_only(h);
    append(out, groups.data(), groups.size() * sizeof(int32_t));
    return out;
}

std::vector<uint8_t> services_reply(RequestType type, const std::string& key) {
    const ServResponseHeader missing{kProtocolVersion, 0, 0, 0, 0, -1};
    const size_t slash = key.find('/');
    if (slash == std::string::npos) return header_only(missing);
    const std::string crit = key.substr(0, slash);
    const std::string proto = key.substr(slash + 1);
    const char* proto_arg = proto.empty() ? nullptr : proto.c_str();
    servent se{};
    servent* result = nullptr;
    std::vector<char> buffer;
    unsigned long port = 0;
    if (type == GETSERVBYPORT && !parse_number(crit, port)) return header_only(missing);
    with_buffer(buffer, [&](char* b, size_t n) {
        // The client sends the port as getservbyport got it: in network order.
        return type == GETSERVBYNAME
                   ? getservbyname_r(crit.c_str(), proto_arg, &se, b, n, &result)
                   : getservbyport_r(static_cast<int>(port), proto_arg, &se, b, n, &result);
    });
    if (result == nullptr) return header_only(missing);
    ServResponseHeader h{};
    h.version = kProtocolVersion;
    h.found = 1;
    h.s_name_len = static_cast<int32_t>(std::strlen(se.s_name) + 1);
    h.s_proto_len = static_cast<int32_t>(std::strlen(se.s_proto) + 1);
    int32_t aliases = 0;
    while (se.s_aliases[aliases] != nullptr) ++aliases;
    h.s_aliases_cnt = aliases;
    h.s_port = se.s_port;
    std::vector<uint8_t> out = header_only(h);
    append_string(out, se.s_name);
    append_string(out, se.s_proto);
    for (int32_t i = 0; i < aliases; ++i) {
        const auto len = static_cast<uint32_t>(std::strlen(se.s_aliases[i]) + 1);
        append(out, &len, sizeof len);
    }
    for (int32_t i = 0; i < aliases; ++i) append_string(out, se.s_aliases[i]);
    return out;
}

}  // namespace

std::vector<uint8_t> declined_reply(RequestType type) {
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return header_only(PwResponseHeader{kProtocolVersion, -1, 0, 0, 0, 0, 0, 0, 0});
        case GETGRBYNAME:
        case GETGRBYGID:
            return header_only(GrResponseHeader{kProtocolVersion, -1, 0, 0, 0, 0});
        case INITGROUPS:
            return header_only(InitgrResponseHeader{kProtocolVersion, -1, 0});
        case GETSERVBYNAME:
        case GETSERVBYPORT:
            return header_only(ServResponseHeader{kProtocolVersion, -1, 0, 0, 0, -1});
        case GETNETGRENT:
            return header_only(NetgroupResponseHeader{kProtocolVersion, -1, 0, 0});
        case INNETGR:
            return header_only(InnetgroupResponseHeader{kProtocolVersion, -1, 0});
        default:
            return {};
    }
}

std::vector<uint8_t> other_database_reply(RequestType type, const std::vector<uint8_t>& key) {
    std::string text;
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return key_string(key, text) ? passwd_reply(type, text) : std::vector<uint8_t>{};
        case GETGRBYNAME:
        case GETGRBYGID:
            return key_string(key, text) ? group_reply(type, text) : std::vector<uint8_t>{};
        case INITGROUPS:
            return key_string(key, text) ? initgroups_reply(text) : std::vector<uint8_t>{};
        case GETSERVBYNAME:
        case GETSERVBYPORT:
            return key_string(key, text) ? services_reply(type, text) : std::vector<uint8_t>{};
        default:
            return declined_reply(type);
    }
}

OtherDatabases::OtherDatabases(EventLoop& loop, unsigned threads, Lookup lookup,
                               std::function<uint64_t()> now_ms)
    : loop_(loop),
      thread_count_(threads == 0 ? 1 : threads),
      lookup_(std::move(lookup)),
      now_ms_(std::move(now_ms)),
      max_running_per_user_(thread_count_ > 1 ? thread_count_ / 2 : 1) {}

OtherDatabases::~OtherDatabases() {
    stop();
}

void OtherDatabases::start() {
    for (unsigned i = 0; i < thread_count_; ++i) threads_.emplace_back([this] { run(); });
}

void OtherDatabases::stop() {
    {
        MutexLock lock(mu_);
        stopping_ = true;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

bool OtherDatabases::submit(uint64_t connection, uid_t user, RequestType type,
                            std::vector<uint8_t> key, uint64_t deadline_ms) {
    {
        MutexLock lock(mu_);
        if (threads_.empty() || queued_ >= kMaxQueued) return false;
        UserQueue& queue = users_[user];
        if (queue.jobs.size() >= kMaxQueuedPerUser) return false;  // not new: it has jobs
        queue.jobs.push_back(Job{connection, user, deadline_ms, type, std::move(key)});
        ++queued_;
        take_turn(user, queue);
    }
    cv_.notify_one();
    return true;
}

void OtherDatabases::cancel(uint64_t connection, uid_t user) {
    MutexLock lock(mu_);
    auto it = users_.find(user);
    if (it == users_.end()) return;
    // At most kMaxQueuedPerUser to look through.
    std::deque<Job>& jobs = it->second.jobs;
    for (auto job = jobs.begin(); job != jobs.end(); ++job) {
        if (job->connection == connection) {
            jobs.erase(job);
            --queued_;
            break;
        }
    }
    forget_if_idle(user);
}

void OtherDatabases::take_turn(uid_t user, UserQueue& queue) {
    if (queue.in_turn || queue.jobs.empty() || queue.running >= max_running_per_user_) return;
    queue.in_turn = true;
    turns_.push_back(user);
}

void OtherDatabases::forget_if_idle(uid_t user) {
    auto it = users_.find(user);
    if (it != users_.end() && it->second.jobs.empty() && it->second.running == 0 &&
        !it->second.in_turn) {
        users_.erase(it);
    }
}

void OtherDatabases::drain(const std::function<void(uint64_t, std::vector<uint8_t>)>& done) {
    std::vector<std::pair<uint64_t, std::vector<uint8_t>>> finished;
    {
        MutexLock lock(mu_);
        finished.swap(done_);
    }
    for (auto& [connection, reply] : finished) done(connection, std::move(reply));
}

// The condition variable needs a std::unique_lock, which the annotations cannot follow.
void OtherDatabases::run() NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
    std::unique_lock<Mutex> lock(mu_);
    for (;;) {
        cv_.wait(lock, [this]() NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
            return stopping_ || !turns_.empty();
        });
        if (stopping_) return;
        const uid_t user = turns_.front();
        turns_.pop_front();
        UserQueue& queue = users_[user];
        queue.in_turn = false;
        if (queue.jobs.empty()) {  // cancelled meanwhile
            forget_if_idle(user);
            continue;
        }
        Job job = std::move(queue.jobs.front());
        queue.jobs.pop_front();
        --queued_;
        // Its client closed the connection at the deadline: nobody would read the answer.
        if (now_ms_() >= job.deadline_ms) {
            take_turn(user, queue);
            forget_if_idle(user);
            continue;
        }
        ++queue.running;
        take_turn(user, queue);  // at the back of the line: the others come first
        if (!turns_.empty()) cv_.notify_one();
        lock.unlock();
        std::vector<uint8_t> reply = lookup_(job.type, job.key);
        lock.lock();
        UserQueue& after = users_[user];  // the reference above may be gone (erased, rehashed)
        --after.running;
        take_turn(user, after);
        forget_if_idle(user);
        if (!turns_.empty()) cv_.notify_one();
        const bool wake = done_.empty();
        done_.emplace_back(job.connection, std::move(reply));
        if (wake) {  // no system call under the lock
            lock.unlock();
            loop_.wake();
            lock.lock();
        }
    }
}

}  // namespace nscache::nscd
