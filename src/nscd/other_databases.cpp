// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/other_databases.h"

#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <sys/types.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "nscd/user_records.h"

namespace nscache::nscd {
namespace {

std::atomic<size_t> left_behind{0};  // OtherDatabases::threads_left_behind()

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
    : thread_count_(threads == 0 ? 1 : threads),
      shared_(std::make_shared<Shared>(loop, std::move(lookup), std::move(now_ms),
                                       thread_count_ > 1 ? thread_count_ / 2 : 1)) {}

OtherDatabases::~OtherDatabases() {
    stop();
}

void OtherDatabases::start() {
    Shared& s = *shared_;
    {
        MutexLock lock(s.mu);
        s.ended.assign(thread_count_, false);
        s.ended_count = 0;
    }
    for (unsigned i = 0; i < thread_count_; ++i) {
        threads_.emplace_back([shared = shared_, i] { run(shared, i); });
    }
}

// The condition variable needs a std::unique_lock, which the annotations cannot follow.
size_t OtherDatabases::threads_left_behind() {
    return left_behind.load(std::memory_order_relaxed);
}

size_t OtherDatabases::stop(uint64_t wait_ms) NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
    if (threads_.empty()) return 0;
    Shared& s = *shared_;
    std::vector<Done> finished;
    std::unordered_map<uid_t, UserQueue> queued;
    std::vector<bool> ended;
    {
        std::unique_lock<Mutex> lock(s.mu);
        s.stopping = true;
        // Destroyed below, unlocked and unrun: a Finish may refer to what is being stopped.
        finished.swap(s.done);
        queued.swap(s.users);
        s.turns.clear();
        s.queued = 0;
        s.cv.notify_all();
        s.cv.wait(lock, [&s]() NSCACHE_NO_THREAD_SAFETY_ANALYSIS { return s.waking == 0; });
        s.cv.wait_for(lock, std::chrono::milliseconds(wait_ms),
                      [this, &s]() NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
                          return s.ended_count == thread_count_;
                      });
        ended = s.ended;
    }
    size_t left = 0;
    for (size_t i = 0; i < threads_.size(); ++i) {
        if (ended[i]) {
            threads_[i].join();  // it has left its loop: at once
        } else {
            threads_[i].detach();  // in an NSS module: it ends on `shared_` alone
            ++left;
            left_behind.fetch_add(1, std::memory_order_relaxed);
        }
    }
    threads_.clear();
    return left;
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
    Shared& s = *shared_;
    {
        MutexLock lock(s.mu);
        if (threads_.empty() || s.stopping || s.queued >= kMaxQueued) return false;
        UserQueue& queue = s.users[user];
        if (queue.jobs.size() >= kMaxQueuedPerUser) return false;  // not new: it has jobs
        queue.jobs.push_back(std::move(job));
        ++s.queued;
        s.take_turn(user, queue);
    }
    s.cv.notify_one();
    return true;
}

void OtherDatabases::cancel(uint64_t connection, uid_t user) {
    Shared& s = *shared_;
    MutexLock lock(s.mu);
    auto it = s.users.find(user);
    if (it == s.users.end()) return;
    // At most kMaxQueuedPerUser to look through.
    std::deque<Job>& jobs = it->second.jobs;
    for (auto job = jobs.begin(); job != jobs.end(); ++job) {
        if (job->connection == connection) {
            jobs.erase(job);
            --s.queued;
            break;
        }
    }
    s.forget_if_idle(user);
}

void OtherDatabases::Shared::take_turn(uid_t user, UserQueue& queue) {
    if (queue.in_turn || queue.jobs.empty() || queue.running >= max_running_per_user) return;
    queue.in_turn = true;
    turns.push_back(user);
}

void OtherDatabases::Shared::forget_if_idle(uid_t user) {
    auto it = users.find(user);
    if (it != users.end() && it->second.jobs.empty() && it->second.running == 0 &&
        !it->second.in_turn) {
        users.erase(it);
    }
}

void OtherDatabases::drain(const std::function<void(uint64_t, std::vector<uint8_t>)>& done) {
    std::vector<Done> finished;
    {
        MutexLock lock(shared_->mu);
        finished.swap(shared_->done);  // empty once stopping: stop() took them
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
void OtherDatabases::run(const std::shared_ptr<Shared>& shared,
                         size_t index) NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
    Shared& s = *shared;
    std::unique_lock<Mutex> lock(s.mu);
    for (;;) {
        s.cv.wait(lock, [&s]() NSCACHE_NO_THREAD_SAFETY_ANALYSIS {
            return s.stopping || !s.turns.empty();
        });
        if (s.stopping) break;
        const uid_t user = s.turns.front();
        s.turns.pop_front();
        UserQueue& queue = s.users[user];
        queue.in_turn = false;
        if (queue.jobs.empty()) {  // cancelled meanwhile
            s.forget_if_idle(user);
            continue;
        }
        Job job = std::move(queue.jobs.front());
        queue.jobs.pop_front();
        --s.queued;
        // Its client closed the connection at the deadline: nobody would read the answer.
        if (s.now_ms() >= job.deadline_ms) {
            s.take_turn(user, queue);
            s.forget_if_idle(user);
            continue;
        }
        ++queue.running;
        s.take_turn(user, queue);  // at the back of the line: the others come first
        if (!s.turns.empty()) s.cv.notify_one();
        lock.unlock();
        Done finished{job.connection, {}, {}};
        if (job.work) {
            finished.finish = job.work();
        } else {
            finished.reply = s.lookup(job.type, job.key);
        }
        lock.lock();
        if (s.stopping) {
            // Stopped while in the module: the answer is nobody's now (its Finish may refer
            // to what is gone), dropped unlocked.
            lock.unlock();
            finished = Done{};
            job = Job{};
            lock.lock();
            break;
        }
        UserQueue& after = s.users[user];  // the reference above may be gone (erased, rehashed)
        --after.running;
        s.take_turn(user, after);
        s.forget_if_idle(user);
        if (!s.turns.empty()) s.cv.notify_one();
        const bool wake = s.done.empty();
        s.done.push_back(std::move(finished));
        if (wake) {  // no system call under the lock
            ++s.waking;
            lock.unlock();
            s.loop.wake();
            lock.lock();
            if (--s.waking == 0 && s.stopping) s.cv.notify_all();
        }
    }
    s.ended[index] = true;
    ++s.ended_count;
    s.cv.notify_all();
}

}  // namespace nscache::nscd
