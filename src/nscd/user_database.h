// SPDX-License-Identifier: BSD-3-Clause
// The nscd front's passwd, group (with initgroups) and services databases: what each request
// gets under its database's policy (docs/nscd.md), from the files the daemon reads itself, NSS
// module jobs on the pool, or the daemon's own libc calls, and what of it is published in the
// database's map (published_map.h).
//
// Policy (nscd-passwd, nscd-group, nscd-services; nscd-netgroup is auto|decline only):
//  - decline: found -1; proxy: libc lookups on the pool, uncached (other_databases.h);
//  - auto: the plan nsdb::plan_for gives the database's nsswitch.conf line:
//    files_only: answered here from the files index, found and not found, published (the
//    file watch flushes it exactly); files_then_modules: a key in the files is answered
//    here and published, any other goes to a module job (ModuleChain over the services
//    after files): found is published (positive TTL), not found answered but never
//    published, unavailable gets no reply; proxy: as the proxy policy;
//  - cache: as auto, but a module's not-found is published too (negative TTL), and with a
//    proxy plan the libc answers are published (positive / negative TTL).
// At most kMaxNegativeRecords not-found records per map live at once (the socket answers the
// rest). Never a negative record for an id in systemd's dynamic range (61184-65519). A failure is
// never an answer: no reply, nothing published.
//
// Jobs: identical requests in flight share one (coalescing), but one user's queue never
// delays another's lookup: a request joins a job only when it already runs on a pool thread
// or was queued by the same uid; otherwise it queues a copy of its own under its own uid
// (OtherDatabases' fairness), and the first copy to finish answers the waiters of every copy
// of that key and drops the others. A client still waiting deadline_ms after it asked is
// closed without a reply (glibc then asks NSS itself, well before its own 5 s), and a job
// whose clients all left is dropped (unrun if still queued). A replan forgets which jobs may
// be joined: those in flight answer only their own waiters.
//
// All of it on the host front's thread; the sources' calls on the pool's threads.
#pragma once

#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/counters.h"
#include "common/event_loop.h"
#include "common/file_watch.h"
#include "common/request_connection.h"
#include "nscd/other_databases.h"
#include "nscd/published_map.h"
#include "nsdb/files_db.h"
#include "nsdb/nsswitch.h"

namespace nscache::nscd {

enum class DbPolicy { automatic, cache, proxy, decline };
// "auto", "cache", "proxy", "decline"; nullopt otherwise.
std::optional<DbPolicy> parse_db_policy(const std::string& text);
const char* db_policy_name(DbPolicy policy);

// The NSS sources after `files` (nsdb::ModuleChain's calls; a test's fake). Thread-safe;
// blocks: pool threads only.
class ModuleSource {
  public:
    virtual ~ModuleSource() = default;
    virtual nsdb::PasswdResult passwd_by_name(const std::string& name) = 0;
    virtual nsdb::PasswdResult passwd_by_uid(uint32_t uid) = 0;
    virtual nsdb::GroupResult group_by_name(const std::string& name) = 0;
    virtual nsdb::GroupResult group_by_gid(uint32_t gid) = 0;
    // `merge_all`: every module's groups (no initgroups line); false: the first SUCCESS ends it
    // (an initgroups line of its own, SwitchLine::merge_groups).
    virtual nsdb::GroupListResult groups_of(const std::string& user, uint32_t primary_gid,
                                            bool merge_all) = 0;
    virtual nsdb::ServiceResult service_by_name(const std::string& name,
                                                const std::string& proto) = 0;
    virtual nsdb::ServiceResult service_by_port(int32_t port, const std::string& proto) = 0;
};
using SourceFactory =
    std::function<std::shared_ptr<ModuleSource>(const std::vector<std::string>& services)>;
// ModuleChain over `services`.
std::shared_ptr<ModuleSource> module_chain_source(const std::vector<std::string>& services);

struct UserDbOptions {
    DbPolicy passwd = DbPolicy::automatic;
    DbPolicy group = DbPolicy::automatic;
    DbPolicy services = DbPolicy::automatic;
    // No netgroup member: nscd-netgroup is accepted ("auto" or "decline") only for symmetry
    // with the other keys, and both mean decline (netgroup is never served, docs/nscd.md).
    uint32_t positive_ttl_s = 600;
    uint32_t negative_ttl_s = 20;
    std::string passwd_path = "/etc/passwd";
    std::string group_path = "/etc/group";
    std::string services_path = "/etc/services";
    std::string nsswitch_path = "/etc/nsswitch.conf";
    MapOptions map;
    bool maps = true;  // false: answers only on the socket (tests)
    uint64_t deadline_ms = 2500;
    // A file larger than this is unreadable (its database proxied): /etc/passwd of 10k users
    // is about 1.5 MB, and the front's thread, which also answers hosts, reads it.
    size_t max_file_bytes = 64u << 20;
    // The files' clock (CLOCK_REALTIME seconds): judges whether a stat is too recent to trust.
    std::function<int64_t()> wall_s = [] { return static_cast<int64_t>(time(nullptr)); };
    SourceFactory sources = module_chain_source;
};

class UserDatabases {
  public:
    enum Db : size_t { kPasswd = 0, kGroup = 1, kServices = 2, kDbs = 3 };
    // Not-found records a map holds at once (MapOptions::max_negative): any local user can ask
    // for names nobody has, and each would be a record for nscd-positive-ttl (files) in a map
    // and its writer's index. Past it a not-found is answered on the socket (from the files
    // index in memory, cheap) but not published; records leave by expiry, flush or rotation.
    static constexpr size_t kMaxNegativeRecords = 4096;
    // The client `connection`, or null when it has gone.
    using FindConnection = std::function<RequestConnection*(uint64_t)>;

    UserDatabases(EventLoop& loop, OtherDatabases& pool, WorkerCounters& counters,
                  UserDbOptions options, FindConnection find);
    ~UserDatabases();

    // Creates the maps (before the privilege drop, at start). An error message on failure.
    std::optional<std::string> open(uint64_t now_s);
    // The front's thread, once: reads the files and nsswitch.conf, plans, starts the watch.
    void start();
    // A request of passwd, group, initgroups, services or netgroup. `self`: the daemon's own
    // process asked (declined, as glibc in the daemon must not ask itself).
    void on_request(RequestConnection& connection, RequestType type, std::vector<uint8_t> key,
                    bool self);
    void on_close(RequestConnection& connection);
    // GETFDPW, GETFDGR, GETFDSERV: the map's reply, or empty (no descriptor) when not cached.
    std::vector<uint8_t> fd_reply(RequestType type, const std::string& name, int& fd) const;
    // INVALIDATE of "passwd", "group" or "services": reads its file again (even if it looks
    // unchanged), plans it again and flushes it; false for other names.
    bool invalidate(const std::string& name);
    // Re-reads the files and nsswitch.conf that may have changed (their stat differs) now
    // (the watch's callback; tests).
    void reload();
    void heartbeat(uint64_t now_s);
    void shutdown();

    // The plan in force (stats: the *_plan gauge's code) and the map's records (tests).
    int plan_code(Db db) const;
    // The plan in words, as the log gives it: "files then systemd", "files only", "decline",
    // "proxy (its nsswitch.conf line has [actions])".
    const std::string& plan_text(Db db) const { return state_[db].plan; }
    size_t map_entries(Db db) const { return maps_[db]->entries(); }
    size_t map_negatives(Db db) const { return maps_[db]->negatives(); }
    uint32_t map_buckets(Db db) { return maps_[db]->writer().buckets(); }
    size_t jobs_in_flight() const { return jobs_.size(); }
    uint64_t files_read() const { return files_read_; }

  private:
    struct Waiter {
        uint64_t connection = 0;
        EventLoop::TimerHandle timer = EventLoop::kNoTimer;
    };
    struct Job {
        Db db = kPasswd;
        RequestType type = GETPWBYNAME;
        std::vector<uint8_t> key;
        std::string index_key;
        uint64_t generation = 0;
        uid_t user = 0;
        uint64_t started_ms = 0;
        bool cache_negative = false;
        std::vector<Waiter> waiters;
        // Set by the pool thread when the work starts: from then on anyone may join it.
        std::shared_ptr<std::atomic<bool>> running;
    };
    // What a job came to: the reply (empty: none) and whether it is a found answer, a
    // not-found one, or no answer at all.
    struct Outcome {
        nsdb::Status status = nsdb::Status::unavailable;
        std::vector<uint8_t> reply;
        bool publish_not_found = false;  // initgroups of a files user: exact enough
        bool incomplete = false;         // initgroups: a module was down (answered, unpublished)
    };
    // A file's stat when last read: an event that leaves it the same reads nothing.
    struct FileSeen {
        struct stat st {};
        bool exists = false;
        bool known = false;
    };
    // The effective way a database is served now.
    enum class Mode { decline, proxy, files_only, files_then_modules, cached_proxy };
    struct State {
        DbPolicy policy = DbPolicy::automatic;
        Mode mode = Mode::proxy;
        Mode initgroups_mode = Mode::proxy;  // group only
        bool initgroups_merge = true;        // group only: SwitchLine::merge_groups
        std::shared_ptr<ModuleSource> modules;
        std::shared_ptr<ModuleSource> initgroups_modules;
        std::string plan;  // the plan in words, as last logged
        std::string text;  // the file as last read
        bool readable = false;
        FileSeen seen;
    };

    static Db db_of(RequestType type);
    // The hash entries the database's files give its map (its bucket count).
    size_t expected_entries(Db db) const;
    // `forced`: that database's file is read and planned again whatever its stat says.
    void reload_now(std::optional<Db> forced);
    std::optional<std::string> read_file(const std::string& path, FileSeen& seen,
                                         std::string& error);
    bool may_have_changed(const std::string& path, FileSeen& seen) const;
    // `unreadable`: the file that could not be read (proxy), empty when all could be; `text`:
    // the plan in words, as logged ("files then systemd", "proxy (why)").
    Mode mode_for(Db db, const nsdb::SwitchLine& line, size_t compat_lines,
                  const std::string& unreadable, std::shared_ptr<ModuleSource>& modules,
                  std::string& text) const;
    // Answers from the files; false when the key is not in them (a module job follows).
    bool answer_from_files(RequestConnection& connection, Db db, RequestType type,
                           const std::vector<uint8_t>& key, const std::string& text, bool final);
    void reply_and_publish(RequestConnection* connection, Db db, RequestType type,
                           const std::vector<uint8_t>& key, std::vector<uint8_t> reply,
                           uint32_t ttl_s);
    void start_job(RequestConnection& connection, Db db, RequestType type, std::vector<uint8_t> key,
                   bool cached_proxy);
    OtherDatabases::Finish run_job(uint64_t token, std::shared_ptr<ModuleSource> modules,
                                   RequestType type, std::string text, bool cached_proxy,
                                   std::vector<uint32_t> files_groups, bool files_user,
                                   bool merge_all);
    void finish(uint64_t token, Outcome outcome);
    void drop_waiter(uint64_t token, uint64_t connection, bool timed_out);
    void set_levels();
    std::atomic<uint64_t>& counter(Db db, int which);

    EventLoop& loop_;
    OtherDatabases& pool_;
    WorkerCounters& counters_;
    UserDbOptions options_;
    FindConnection find_;
    std::array<std::unique_ptr<PublishedMap>, kDbs> maps_;
    std::array<State, kDbs> state_;
    std::string nsswitch_text_;
    bool nsswitch_read_ = false;
    FileSeen nsswitch_seen_;
    uint64_t files_read_ = 0;
    std::optional<nsdb::PasswdFile> passwd_;
    std::optional<nsdb::GroupFile> group_;
    std::optional<nsdb::ServicesFile> services_;
    FileWatch watch_;
    uint64_t next_token_ = 1;
    std::unordered_map<uint64_t, Job> jobs_;  // by token
    // (type, key) -> the tokens of its copies that may be joined (at most one per uid).
    std::unordered_map<std::string, std::vector<uint64_t>> joinable_;
    void forget_joinable(const std::string& index_key, uint64_t token);
    std::unordered_map<uint64_t, uint64_t> waiting_;  // connection -> token
};

}  // namespace nscache::nscd
