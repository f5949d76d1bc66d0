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

#include "nscd/user_records.h"

namespace nscache::nscd {
namespace {

// Lookups waiting for a pool thread, in all and per user; past these a client gets no reply
// and asks NSS itself. A user's share is well below the total (as its connections are: an
// eighth, common/request_connection.h).
constexpr size_t kMaxQueued = 1024;
constexpr size_t kMaxQueuedPerUser = 64;
constexpr size_t kMaxBuffer = 1u << 20;

std::vector<uint8_t> not_found(RequestType type) {
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return passwd_record(nullptr);
        case GETGRBYNAME:
        case GETGRBYGID:
            return group_record(nullptr);
        default:
            return service_record(nullptr);
    }
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
        return not_found(type);
    }
    const int rc = with_buffer(buffer, [&](char* b, size_t n) {
        return type == GETPWBYNAME ? getpwnam_r(key.c_str(), &pw, b, n, &result)
                                   : getpwuid_r(static_cast<uid_t>(uid), &pw, b, n, &result);
    });
    if (result == nullptr) {
        // Not found is an answer; a failure (a module unreachable) is no reply at all.
        if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) return {};
        return not_found(type);
    }
    nsdb::PasswdEntry e{pw.pw_name,  pw.pw_passwd, pw.pw_uid,  pw.pw_gid,
                        pw.pw_gecos, pw.pw_dir,    pw.pw_shell};
    return passwd_record(&e);
}

std::vector<uint8_t> group_reply(RequestType type, const std::string& key) {
    group gr{};
    group* result = nullptr;
    std::vector<char> buffer;
    unsigned long gid = 0;
    if (type == GETGRBYGID && !parse_number(key, gid)) {
        return not_found(type);
    }
    const int rc = with_buffer(buffer, [&](char* b, size_t n) {
        return type == GETGRBYNAME ? getgrnam_r(key.c_str(), &gr, b, n, &result)
                                   : getgrgid_r(static_cast<gid_t>(gid), &gr, b, n, &result);
    });
    if (result == nullptr) {
        if (rc != 0 && rc != ENOENT && rc != ESRCH && rc != EBADF && rc != EPERM) return {};
        return not_found(type);
    }
    nsdb::GroupEntry e{gr.gr_name, gr.gr_passwd, gr.gr_gid, {}};
    for (char** m = gr.gr_mem; *m != nullptr; ++m) e.members.emplace_back(*m);
    return group_record(&e);
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
    std::vector<uint32_t> groups;
    for (gid_t g : with0) {
        bool in_both = false;
        for (gid_t o : with1) in_both = in_both || o == g;
        if (in_both) groups.push_back(g);
    }
    return initgroups_record(&groups);
}

std::vector<uint8_t> services_reply(RequestType type, const std::string& key) {
    const std::vector<uint8_t> missing = service_record(nullptr);
    const size_t slash = key.find('/');
    if (slash == std::string::npos) return missing;
    const std::string crit = key.substr(0, slash);
    const std::string proto = key.substr(slash + 1);
    const char* proto_arg = proto.empty() ? nullptr : proto.c_str();
    servent se{};
    servent* result = nullptr;
    std::vector<char> buffer;
    unsigned long port = 0;
    if (type == GETSERVBYPORT && !parse_number(crit, port)) return missing;
    with_buffer(buffer, [&](char* b, size_t n) {
        // The client sends the port as getservbyport got it: in network order.
        return type == GETSERVBYNAME
                   ? getservbyname_r(crit.c_str(), proto_arg, &se, b, n, &result)
                   : getservbyport_r(static_cast<int>(port), proto_arg, &se, b, n, &result);
    });
    if (result == nullptr) return missing;
    nsdb::ServiceEntry e{se.s_name, {}, se.s_port, se.s_proto};
    for (char** a = se.s_aliases; *a != nullptr; ++a) e.aliases.emplace_back(*a);
    return service_record(&e);
}

}  // namespace

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
    return queue(Job{connection, user, deadline_ms, type, std::move(key), {}});
}

bool OtherDatabases::submit_work(uint64_t id, uid_t user, Work work, uint64_t deadline_ms) {
    return queue(Job{id, user, deadline_ms, GETPWBYNAME, {}, std::move(work)});
}

bool OtherDatabases::queue(Job job) {
    const uid_t user = job.user;
    {
        MutexLock lock(mu_);
        if (threads_.empty() || queued_ >= kMaxQueued) return false;
        UserQueue& queue = users_[user];
        if (queue.jobs.size() >= kMaxQueuedPerUser) return false;  // not new: it has jobs
        queue.jobs.push_back(std::move(job));
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
    std::vector<Done> finished;
    {
        MutexLock lock(mu_);
        finished.swap(done_);
    }
    for (Done& d : finished) {
        if (d.finish) {
            d.finish();
        } else {
            done(d.connection, std::move(d.reply));
        }
    }
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
        Done finished{job.connection, {}, {}};
        if (job.work) {
            finished.finish = job.work();
        } else {
            finished.reply = lookup_(job.type, job.key);
        }
        lock.lock();
        UserQueue& after = users_[user];  // the reference above may be gone (erased, rehashed)
        --after.running;
        take_turn(user, after);
        forget_if_idle(user);
        if (!turns_.empty()) cv_.notify_one();
        const bool wake = done_.empty();
        done_.push_back(std::move(finished));
        if (wake) {  // no system call under the lock
            lock.unlock();
            loop_.wake();
            lock.lock();
        }
    }
}

}  // namespace nscache::nscd
