// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/user_database.h"

#include <sys/stat.h>
#include <algorithm>
#include <cstring>

#include <cerrno>
#include <ctime>

#include "common/files.h"
#include "common/log.h"
#include "nscd/user_records.h"
#include "nsdb/module_chain.h"

namespace nscache::nscd {
namespace {

// systemd's DynamicUser range: an id there may come and go with a service, so "no such id"
// is never remembered.
constexpr uint32_t kDynamicFirst = 61184;
constexpr uint32_t kDynamicLast = 65519;
// Job tokens share OtherDatabases' cancel ids with the connections of uncached proxy lookups:
// the high bit keeps them apart.
constexpr uint64_t kTokenBit = uint64_t{1} << 63;
// initgroups_dyn is asked with no group to leave out, as nscd does.
constexpr uint32_t kNoGroup = ~uint32_t{0};

class ChainSource final : public ModuleSource {
  public:
    explicit ChainSource(const std::vector<std::string>& services) : chain_(services) {}
    nsdb::PasswdResult passwd_by_name(const std::string& n) override {
        return chain_.passwd_by_name(n);
    }
    nsdb::PasswdResult passwd_by_uid(uint32_t u) override { return chain_.passwd_by_uid(u); }
    nsdb::GroupResult group_by_name(const std::string& n) override {
        return chain_.group_by_name(n);
    }
    nsdb::GroupResult group_by_gid(uint32_t g) override { return chain_.group_by_gid(g); }
    nsdb::GroupListResult groups_of(const std::string& u, uint32_t g, bool merge_all) override {
        return chain_.groups_of(u, g, merge_all);
    }
    nsdb::ServiceResult service_by_name(const std::string& n, const std::string& p) override {
        return chain_.service_by_name(n, p);
    }
    nsdb::ServiceResult service_by_port(int32_t port, const std::string& p) override {
        return chain_.service_by_port(port, p);
    }

  private:
    nsdb::ModuleChain chain_;
};

bool in_dynamic_range(uint32_t id) {
    return id >= kDynamicFirst && id <= kDynamicLast;
}

// A found record from a module names an id in systemd's dynamic range: a DynamicUser's id
// is freed when its service stops and may be handed to another, so the record is answered
// but never published (libnss_systemd answers over a local varlink call: cheap to ask).
bool names_dynamic_id(RequestType type, const std::vector<uint8_t>& reply) {
    auto at = [&reply](size_t offset) {
        uint32_t v = 0;
        if (reply.size() >= offset + sizeof v) std::memcpy(&v, reply.data() + offset, sizeof v);
        return v;
    };
    if (reply.size() < 2 * sizeof(int32_t) || at(sizeof(int32_t)) != 1) return false;
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:  // pw_response_header: pw_uid at 16, pw_gid at 20
            return in_dynamic_range(at(16)) || in_dynamic_range(at(20));
        case GETGRBYNAME:
        case GETGRBYGID:  // gr_response_header: gr_gid at 16
            return in_dynamic_range(at(16));
        case INITGROUPS: {  // initgr_response_header: ngrps at 8, the gids from 12
            const uint32_t n = at(8);
            for (uint32_t i = 0; i < n; ++i) {
                if (in_dynamic_range(at(12 + 4 * size_t{i}))) return true;
            }
            return false;
        }
        default:
            return false;
    }
}

// Why a database's nsswitch.conf line can only be proxied (nsdb::plan_for's proxy), for the
// log line of its plan: the first reason that applies.
std::string proxy_reason(const nsdb::SwitchLine& line, size_t compat_lines) {
    if (line.has_actions) return "its nsswitch.conf line has [actions]";
    if (line.services.empty()) return "its nsswitch.conf line names no source";
    if (line.services[0] == "compat" && compat_lines > 0)
        return "compat with +/- lines in the file";
    return "its nsswitch.conf line starts with " + line.services[0] + ", not files";
}

bool by_id(RequestType type) {
    return type == GETPWBYUID || type == GETGRBYGID;
}

std::vector<uint8_t> not_found_reply(RequestType type) {
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return passwd_record(nullptr);
        case GETGRBYNAME:
        case GETGRBYGID:
            return group_record(nullptr);
        case INITGROUPS:
            return initgroups_record(nullptr);
        default:
            return service_record(nullptr);
    }
}

}  // namespace

std::optional<DbPolicy> parse_db_policy(const std::string& text) {
    if (text == "auto") return DbPolicy::automatic;
    if (text == "cache") return DbPolicy::cache;
    if (text == "proxy") return DbPolicy::proxy;
    if (text == "decline") return DbPolicy::decline;
    return std::nullopt;
}

const char* db_policy_name(DbPolicy policy) {
    switch (policy) {
        case DbPolicy::automatic:
            return "auto";
        case DbPolicy::cache:
            return "cache";
        case DbPolicy::proxy:
            return "proxy";
        case DbPolicy::decline:
            return "decline";
    }
    return "auto";
}

std::shared_ptr<ModuleSource> module_chain_source(const std::vector<std::string>& services) {
    return std::make_shared<ChainSource>(services);
}

UserDatabases::UserDatabases(EventLoop& loop, OtherDatabases& pool, WorkerCounters& counters,
                             UserDbOptions options, FindConnection find)
    : loop_(loop),
      pool_(pool),
      counters_(counters),
      options_(std::move(options)),
      find_(std::move(find)),
      watch_(loop, [this] { reload(); }) {
    static const char* const kNames[kDbs] = {"passwd", "group", "services"};
    for (size_t i = 0; i < kDbs; ++i) {
        MapOptions map = options_.map;
        map.max_negative = kMaxNegativeRecords;
        maps_[i] = std::make_unique<PublishedMap>(loop_, counters_, map, i + 1, kNames[i]);
        maps_[i]->set_expired_listener([this] { set_levels(); });
    }
    state_[kPasswd].policy = options_.passwd;
    state_[kGroup].policy = options_.group;
    state_[kServices].policy = options_.services;
}

UserDatabases::~UserDatabases() {
    for (auto& [token, job] : jobs_) {
        for (Waiter& w : job.waiters) loop_.cancel_timer(w.timer);
    }
}

std::optional<std::string> UserDatabases::open(uint64_t now_s) {
    if (!options_.maps) return std::nullopt;
    for (size_t i = 0; i < kDbs; ++i) {
        if (state_[i].policy == DbPolicy::decline || state_[i].policy == DbPolicy::proxy) continue;
        if (auto error = maps_[i]->open(now_s)) return error;
    }
    return std::nullopt;
}

void UserDatabases::start() {
    reload();
    watch_.watch({options_.passwd_path, options_.group_path, options_.services_path,
                  options_.nsswitch_path});
}

UserDatabases::Mode UserDatabases::mode_for(Db db, const nsdb::SwitchLine& line,
                                            size_t compat_lines, const std::string& unreadable,
                                            std::shared_ptr<ModuleSource>& modules,
                                            std::string& text) const {
    const DbPolicy policy = state_[db].policy;
    if (policy == DbPolicy::decline) {
        text = "decline";
        return Mode::decline;
    }
    if (policy == DbPolicy::proxy) {
        text = "proxy (nscd-" + maps_[db]->name() + " = \"proxy\")";
        return Mode::proxy;
    }
    const nsdb::SourcePlan plan = nsdb::plan_for(line, compat_lines);
    // A file the daemon cannot read is one glibc's files module cannot either: its own calls
    // give the caller what they would without nscd.
    if (!unreadable.empty() || plan.plan == nsdb::Plan::proxy) {
        const std::string why =
            !unreadable.empty() ? unreadable + " unreadable" : proxy_reason(line, compat_lines);
        const bool cached = policy == DbPolicy::cache;
        text = std::string(cached ? "cached proxy (" : "proxy (") + why + ")";
        return cached ? Mode::cached_proxy : Mode::proxy;
    }
    if (plan.plan == nsdb::Plan::files_only) {
        text = "files only";
        return Mode::files_only;
    }
    text = "files";
    for (const std::string& m : plan.modules) text += " then " + m;
    if (policy == DbPolicy::cache) text += " (their not-found cached too)";
    modules = options_.sources(plan.modules);
    return Mode::files_then_modules;
}

void UserDatabases::reload() {
    reload_now(std::nullopt);
}

std::optional<std::string> UserDatabases::read_file(const std::string& path, FileSeen& seen,
                                                    std::string& error) {
    ++files_read_;
    std::optional<std::string> text = read_small_file(path, options_.max_file_bytes, error);
    if (!text) {
        if (errno == ENOENT) error.clear();  // missing: nothing to say beyond the plan
        seen.known = false;                  // read it again on the next event, whatever
    }
    return text;
}

// Whether `path` may differ from when `seen` was taken (and takes it anew). A stat the same
// as before skips the read, except when the file changed in the last 2 s: its timestamp's
// granularity (a jiffy) cannot tell two writes in that time apart.
bool UserDatabases::may_have_changed(const std::string& path, FileSeen& seen) const {
    struct stat st {};
    const bool exists = stat(path.c_str(), &st) == 0;
    const int64_t now_s = options_.wall_s();
    const bool same =
        seen.known && exists == seen.exists &&
        (!exists ||
         (st.st_dev == seen.st.st_dev && st.st_ino == seen.st.st_ino &&
          st.st_size == seen.st.st_size && st.st_mtim.tv_sec == seen.st.st_mtim.tv_sec &&
          st.st_mtim.tv_nsec == seen.st.st_mtim.tv_nsec &&
          st.st_ctim.tv_sec == seen.st.st_ctim.tv_sec &&
          st.st_ctim.tv_nsec == seen.st.st_ctim.tv_nsec && now_s > st.st_ctim.tv_sec + 2));
    seen.known = true;
    seen.exists = exists;
    seen.st = st;
    return !same;
}

void UserDatabases::reload_now(std::optional<Db> forced) {
    bool changed[kDbs] = {false, false, false};
    bool passwd_text_changed = false;
    bool replan = !nsswitch_read_;
    if (forced || may_have_changed(options_.nsswitch_path, nsswitch_seen_)) {
        std::string error;
        auto nss = read_file(options_.nsswitch_path, nsswitch_seen_, error);
        // A missing nsswitch.conf is glibc's defaults; an unreadable one too, for want of
        // better.
        if (!error.empty()) {
            log_warning("nscd: %s unreadable (%s): glibc's defaults assumed",
                        options_.nsswitch_path.c_str(), error.c_str());
        }
        std::string nss_text = nss.value_or("");
        replan = replan || nss_text != nsswitch_text_;
        nsswitch_text_ = std::move(nss_text);
        nsswitch_read_ = true;
    }
    const std::string* paths[kDbs] = {&options_.passwd_path, &options_.group_path,
                                      &options_.services_path};
    for (size_t i = 0; i < kDbs; ++i) {
        State& st = state_[i];
        const bool force = forced && *forced == i;
        if (!force && !may_have_changed(*paths[i], st.seen)) {
            changed[i] = replan;
            continue;
        }
        std::string error;
        auto text = read_file(*paths[i], st.seen, error);
        const bool readable = text.has_value();
        const bool same = readable == st.readable && (!readable || *text == st.text);
        if (same && !force) {
            changed[i] = replan;
            continue;
        }
        if (i == kPasswd) passwd_text_changed = !same;
        if (!readable && !error.empty()) {
            log_warning("nscd %s: %s unreadable (%s): proxied", maps_[i]->name().c_str(),
                        paths[i]->c_str(), error.c_str());
        }
        changed[i] = true;
        st.readable = readable;
        st.text = text.value_or("");
        if (i == kPasswd) {
            passwd_ = readable ? std::optional(nsdb::PasswdFile::parse(st.text)) : std::nullopt;
        } else if (i == kGroup) {
            group_ = readable ? std::optional(nsdb::GroupFile::parse(st.text)) : std::nullopt;
        } else {
            services_ = readable ? std::optional(nsdb::ServicesFile::parse(st.text)) : std::nullopt;
        }
    }
    // initgroups answers use the passwd file (is the user a files user?).
    if (passwd_text_changed) changed[kGroup] = true;
    if (!replan && !changed[kPasswd] && !changed[kGroup] && !changed[kServices]) return;
    const nsdb::NsswitchConf conf = nsdb::NsswitchConf::parse(nsswitch_text_);
    for (size_t i = 0; i < kDbs; ++i) {
        if (!changed[i] && !replan) continue;
        State& s = state_[i];
        s.modules.reset();
        s.initgroups_modules.reset();
        const auto db = static_cast<Db>(i);
        const std::string unreadable = s.readable ? std::string() : *paths[i];
        std::string plan;
        if (db == kPasswd) {
            s.mode = mode_for(db, conf.line("passwd"), passwd_ ? passwd_->compat_lines() : 0,
                              unreadable, s.modules, plan);
        } else if (db == kGroup) {
            const size_t compat = group_ ? group_->compat_lines() : 0;
            s.mode = mode_for(db, conf.line("group"), compat, unreadable, s.modules, plan);
            // initgroups also needs the passwd file (the user's files entry).
            const nsdb::SwitchLine initgroups = conf.line("initgroups");
            std::string initgroups_plan;
            s.initgroups_mode = mode_for(
                db, initgroups, compat,
                (!unreadable.empty() || passwd_.has_value()) ? unreadable : options_.passwd_path,
                s.initgroups_modules, initgroups_plan);
            s.initgroups_merge = initgroups.merge_groups;
            if (s.initgroups_mode == Mode::files_then_modules && !s.initgroups_merge)
                initgroups_plan += " (its own line: the first success ends it)";
            if (initgroups_plan != plan) plan += "; initgroups: " + initgroups_plan;
        } else {
            s.mode = mode_for(db, conf.line("services"), 0, unreadable, s.modules, plan);
        }
        // At start and when a replan changes it: the policy alone does not say how a
        // database is served (auto may proxy it, for an action or an unreadable file).
        if (plan != s.plan) {
            log_info("nscd %s: %s", maps_[i]->name().c_str(), plan.c_str());
            s.plan = std::move(plan);
        }
        maps_[i]->writer().set_expected_entries(expected_entries(db));
        maps_[i]->flush();
        // Jobs started under the old plan answer only their own waiters.
        for (auto j = joinable_.begin(); j != joinable_.end();) {
            std::erase_if(j->second, [&](uint64_t t) { return jobs_.at(t).db == db; });
            j = j->second.empty() ? joinable_.erase(j) : std::next(j);
        }
    }
    set_levels();
}

// The hash entries a database's map holds once every entry of its file has been asked for, as
// nscd publishes them (the map's bucket count follows it, map_writer.h): passwd and group by
// name and by id (the extra key nscd adds), initgroups one a user, services about two (the
// requested keys: with and without a protocol, by name or by port). Not-found records and
// module answers come on top: a rotation counts what is live then.
size_t UserDatabases::expected_entries(Db db) const {
    const size_t users = passwd_ ? passwd_->size() : 0;
    switch (db) {
        case kPasswd:
            return 2 * users;
        case kGroup:
            return 2 * (group_ ? group_->size() : 0) + users;
        default:
            return 2 * (services_ ? services_->size() : 0);
    }
}

UserDatabases::Db UserDatabases::db_of(RequestType type) {
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID:
            return kPasswd;
        case GETGRBYNAME:
        case GETGRBYGID:
        case INITGROUPS:
            return kGroup;
        default:
            return kServices;
    }
}

std::atomic<uint64_t>& UserDatabases::counter(Db db, int which) {
    static constexpr std::atomic<uint64_t> WorkerCounters::*kFields[kDbs][4] = {
        {&WorkerCounters::nscd_passwd_hits, &WorkerCounters::nscd_passwd_misses,
         &WorkerCounters::nscd_passwd_proxied, &WorkerCounters::nscd_passwd_declined},
        {&WorkerCounters::nscd_group_hits, &WorkerCounters::nscd_group_misses,
         &WorkerCounters::nscd_group_proxied, &WorkerCounters::nscd_group_declined},
        {&WorkerCounters::nscd_services_hits, &WorkerCounters::nscd_services_misses,
         &WorkerCounters::nscd_services_proxied, &WorkerCounters::nscd_services_declined}};
    return counters_.*kFields[db][which];
}

int UserDatabases::plan_code(Db db) const {
    const State& s = state_[db];
    const int base = s.policy == DbPolicy::cache ? 3 : 0;
    switch (s.mode) {
        case Mode::decline:
            return 0;
        case Mode::proxy:
            return 1;
        case Mode::cached_proxy:
            return 4;
        case Mode::files_only:
            return 2 + base;
        case Mode::files_then_modules:
            return 3 + base;
    }
    return 1;
}

void UserDatabases::set_levels() {
    set_level(counters_.nscd_passwd_map_records, maps_[kPasswd]->entries());
    set_level(counters_.nscd_group_map_records, maps_[kGroup]->entries());
    set_level(counters_.nscd_services_map_records, maps_[kServices]->entries());
    set_level(counters_.nscd_passwd_plan, static_cast<uint64_t>(plan_code(kPasswd)));
    set_level(counters_.nscd_group_plan, static_cast<uint64_t>(plan_code(kGroup)));
    set_level(counters_.nscd_services_plan, static_cast<uint64_t>(plan_code(kServices)));
}

void UserDatabases::on_request(RequestConnection& connection, RequestType type,
                               std::vector<uint8_t> key, bool self) {
    if (type == GETNETGRENT || type == INNETGR) {
        bump(counters_.nscd_netgroup_declined);
        connection.send(declined_reply(type));
        return;
    }
    const Db db = db_of(type);
    const State& s = state_[db];
    const Mode mode = type == INITGROUPS ? s.initgroups_mode : s.mode;
    if (self || mode == Mode::decline) {
        bump(counter(db, 3));
        connection.send(declined_reply(type));
        return;
    }
    std::string text;
    if (!key_string(key, text)) {
        connection.send({});
        return;
    }
    if (mode == Mode::proxy) {
        bump(counter(db, 2));
        bump(counters_.nscd_other_requests);
        if (!pool_.submit(connection.id(), connection.peer_uid(), type, std::move(key),
                          loop_.now_ms() + options_.deadline_ms)) {
            connection.send({});
        }
        return;
    }
    if (mode == Mode::cached_proxy) {
        start_job(connection, db, type, std::move(key), true);
        return;
    }
    if (answer_from_files(connection, db, type, key, text, mode == Mode::files_only)) {
        bump(counter(db, 0));
        return;
    }
    start_job(connection, db, type, std::move(key), false);
}

bool UserDatabases::answer_from_files(RequestConnection& connection, Db db, RequestType type,
                                      const std::vector<uint8_t>& key, const std::string& text,
                                      bool final) {
    const uint32_t ttl = options_.positive_ttl_s;
    PublishedMap& map = *maps_[db];
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID: {
            if (!passwd_) return false;
            const nsdb::PasswdEntry* e = nullptr;
            std::optional<uint32_t> id;
            if (type == GETPWBYNAME) {
                e = passwd_->by_name(text);
            } else if ((id = parse_id(text))) {
                e = passwd_->by_uid(*id);
            } else {
                // Not a number: no id matches it, whatever the sources.
                connection.send(passwd_record(nullptr));
                return true;
            }
            if (e == nullptr && !final) return false;
            std::vector<uint8_t> reply = passwd_record(e);
            if (e != nullptr) {
                // The keys nscd adds, where this very entry is what glibc's files would give.
                if (type == GETPWBYUID && passwd_->by_name(e->name) == e) {
                    map.publish(GETPWBYNAME, name_key(e->name), reply, ttl);
                }
                if (type == GETPWBYNAME && passwd_->by_uid(e->uid) == e) {
                    map.publish(GETPWBYUID, id_key(e->uid), reply, ttl);
                }
            }
            reply_and_publish(&connection, db, type, key, std::move(reply), ttl);
            return true;
        }
        case GETGRBYNAME:
        case GETGRBYGID: {
            if (!group_) return false;
            const nsdb::GroupEntry* e = nullptr;
            std::optional<uint32_t> id;
            if (type == GETGRBYNAME) {
                e = group_->by_name(text);
            } else if ((id = parse_id(text))) {
                e = group_->by_gid(*id);
            } else {
                connection.send(group_record(nullptr));
                return true;
            }
            if (e == nullptr && !final) return false;
            std::vector<uint8_t> reply = group_record(e);
            if (e != nullptr) {
                if (type == GETGRBYGID && group_->by_name(e->name) == e) {
                    map.publish(GETGRBYNAME, name_key(e->name), reply, ttl);
                }
                if (type == GETGRBYNAME && group_->by_gid(e->gid) == e) {
                    map.publish(GETGRBYGID, id_key(e->gid), reply, ttl);
                }
            }
            reply_and_publish(&connection, db, type, key, std::move(reply), ttl);
            return true;
        }
        case INITGROUPS: {
            if (!group_) return false;
            const std::vector<uint32_t> gids = group_->groups_of(text);
            // Other sources add groups (a job), unless an initgroups line of its own stops at
            // the files' SUCCESS (the user is in a files group), as glibc does.
            if (!final && (state_[kGroup].initgroups_merge || gids.empty())) return false;
            reply_and_publish(&connection, db, type, key,
                              initgroups_record(gids.empty() ? nullptr : &gids), ttl);
            return true;
        }
        default: {
            if (!services_) return false;
            std::string crit;
            std::string proto;
            if (!split_service_key(text, crit, proto)) {
                connection.send(service_record(nullptr));
                return true;
            }
            const nsdb::ServiceEntry* e = nullptr;
            if (type == GETSERVBYNAME) {
                e = services_->by_name(crit, proto);
            } else if (auto port = parse_id(crit)) {
                e = services_->by_port(static_cast<int32_t>(*port), proto);
            } else {
                connection.send(service_record(nullptr));
                return true;
            }
            if (e == nullptr && !final) return false;
            reply_and_publish(&connection, db, type, key, service_record(e), ttl);
            return true;
        }
    }
}

void UserDatabases::reply_and_publish(RequestConnection* connection, Db db, RequestType type,
                                      const std::vector<uint8_t>& key, std::vector<uint8_t> reply,
                                      uint32_t ttl_s) {
    if (ttl_s > 0) maps_[db]->publish(type, key, reply, ttl_s);
    set_levels();
    if (connection != nullptr) connection->send(std::move(reply));
}

void UserDatabases::start_job(RequestConnection& connection, Db db, RequestType type,
                              std::vector<uint8_t> key, bool cached_proxy) {
    std::string index_key = MapWriter::index_key(type, key);
    const uid_t user = connection.peer_uid();
    uint64_t token = 0;
    std::vector<uint64_t>& copies = joinable_[index_key];
    for (auto t = copies.begin(); t != copies.end();) {
        const Job& other = jobs_.at(*t);
        const bool running = other.running->load(std::memory_order_acquire);
        // A job queued past half the deadline may be dropped unrun (a full pool): a newcomer
        // then starts its own rather than wait on it to its own deadline.
        if (!running && loop_.now_ms() >= other.started_ms + options_.deadline_ms / 2) {
            t = copies.erase(t);
            continue;
        }
        // Another user's queued job may wait behind that user's own slow lookups.
        if (running || other.user == user) {
            token = *t;
            break;
        }
        ++t;
    }
    if (token != 0) {
        bump(counters_.nscd_jobs_coalesced);
    } else {
        token = kTokenBit | next_token_++;
        auto running = std::make_shared<std::atomic<bool>>(false);
        const State& s = state_[db];
        std::string text;
        key_string(key, text);
        std::vector<uint32_t> files_groups;
        bool files_user = false;
        if (type == INITGROUPS && group_) {
            files_groups = group_->groups_of(text);
            files_user = passwd_ && passwd_->by_name(text) != nullptr;
        }
        auto modules = type == INITGROUPS ? s.initgroups_modules : s.modules;
        auto work = [this, token, modules, type, text, cached_proxy,
                     files_groups = std::move(files_groups), files_user, running,
                     merge_all = s.initgroups_merge]() {
            running->store(true, std::memory_order_release);
            return run_job(token, modules, type, text, cached_proxy, files_groups, files_user,
                           merge_all);
        };
        if (!pool_.submit_work(token, user, std::move(work),
                               loop_.now_ms() + options_.deadline_ms)) {
            if (copies.empty()) joinable_.erase(index_key);
            connection.send({});  // the pool is full: glibc asks NSS itself
            return;
        }
        bump(counter(db, 1));
        Job job;
        job.db = db;
        job.type = type;
        job.key = std::move(key);
        job.index_key = index_key;
        job.generation = maps_[db]->generation();
        job.user = user;
        job.started_ms = loop_.now_ms();
        job.cache_negative = s.policy == DbPolicy::cache;
        job.running = std::move(running);
        jobs_.emplace(token, std::move(job));
        copies.push_back(token);
    }
    Job& job = jobs_.at(token);
    const uint64_t id = connection.id();
    Waiter w;
    w.connection = id;
    w.timer = loop_.add_timer(loop_.now_ms() + options_.deadline_ms,
                              [this, token, id] { drop_waiter(token, id, true); });
    job.waiters.push_back(w);
    waiting_[id] = token;
}

// On a pool thread: asks the sources (or libc) and encodes the reply there.
OtherDatabases::Finish UserDatabases::run_job(uint64_t token, std::shared_ptr<ModuleSource> m,
                                              RequestType type, std::string text, bool cached_proxy,
                                              std::vector<uint32_t> files_groups, bool files_user,
                                              bool merge_all) {
    Outcome o;
    if (cached_proxy || m == nullptr) {
        o.reply = other_database_reply(type, name_key(text));
        if (o.reply.size() >= 2 * sizeof(int32_t)) {
            int32_t found = 0;
            std::memcpy(&found, o.reply.data() + sizeof(int32_t), sizeof found);
            o.status = found == 1   ? nsdb::Status::found
                       : found == 0 ? nsdb::Status::not_found
                                    : nsdb::Status::unavailable;
        }
        if (o.status == nsdb::Status::unavailable) o.reply.clear();
        return [this, token, o = std::move(o)]() mutable { finish(token, std::move(o)); };
    }
    auto take = [&o](nsdb::Status st, std::vector<uint8_t> found_reply) {
        o.status = st;
        if (st == nsdb::Status::found) o.reply = std::move(found_reply);
    };
    switch (type) {
        case GETPWBYNAME:
        case GETPWBYUID: {
            nsdb::PasswdResult r;
            if (type == GETPWBYNAME) {
                r = m->passwd_by_name(text);
            } else if (auto id = parse_id(text)) {
                r = m->passwd_by_uid(*id);
            }
            take(r.status, passwd_record(&r.entry));
            break;
        }
        case GETGRBYNAME:
        case GETGRBYGID: {
            nsdb::GroupResult r;
            if (type == GETGRBYNAME) {
                r = m->group_by_name(text);
            } else if (auto id = parse_id(text)) {
                r = m->group_by_gid(*id);
            }
            take(r.status, group_record(&r.entry));
            break;
        }
        case INITGROUPS: {
            nsdb::GroupListResult r = m->groups_of(text, kNoGroup, merge_all);
            // As glibc's internal_getgrouplist: a module's TRYAGAIN or UNAVAIL adds nothing
            // and the lookup goes on; the answer is the groups collected. No reply would
            // turn off the group map in the caller for 100 calls (the flag is shared).
            o.incomplete = r.status == nsdb::Status::unavailable || r.incomplete;
            std::vector<uint32_t> all = files_groups;
            for (uint32_t g : r.entry) {
                if (std::find(all.begin(), all.end(), g) == all.end()) all.push_back(g);
            }
            o.status = all.empty() ? nsdb::Status::not_found : nsdb::Status::found;
            o.reply = initgroups_record(all.empty() ? nullptr : &all);
            // A user of the files whose groups the files give: the modules added nothing.
            o.publish_not_found = files_user;
            if (files_user && r.status != nsdb::Status::found) o.status = nsdb::Status::found;
            break;
        }
        default: {
            std::string crit;
            std::string proto;
            nsdb::ServiceResult r;
            if (split_service_key(text, crit, proto)) {
                if (type == GETSERVBYNAME) {
                    r = m->service_by_name(crit, proto);
                } else if (auto port = parse_id(crit)) {
                    r = m->service_by_port(static_cast<int32_t>(*port), proto);
                }
            }
            take(r.status, service_record(&r.entry));
            break;
        }
    }
    if (o.status == nsdb::Status::not_found && o.reply.empty()) o.reply = not_found_reply(type);
    return [this, token, o = std::move(o)]() mutable { finish(token, std::move(o)); };
}

void UserDatabases::finish(uint64_t token, Outcome o) {
    auto it = jobs_.find(token);
    if (it == jobs_.end()) return;  // every client left (or timed out): nobody to tell
    Job job = std::move(it->second);
    jobs_.erase(it);
    // The other copies of this key (queued by other users) get this answer and are dropped.
    std::vector<Waiter> waiters = std::move(job.waiters);
    if (auto j = joinable_.find(job.index_key); j != joinable_.end()) {
        const bool listed = std::find(j->second.begin(), j->second.end(), token) != j->second.end();
        if (listed) {
            for (uint64_t other : j->second) {
                auto o2 = jobs_.find(other);
                if (other == token || o2 == jobs_.end()) continue;
                pool_.cancel(other, o2->second.user);
                for (Waiter& w : o2->second.waiters) waiters.push_back(w);
                jobs_.erase(o2);
            }
            joinable_.erase(j);
        }
    }
    uint32_t ttl = 0;
    std::string text;
    key_string(job.key, text);
    const std::optional<uint32_t> id = by_id(job.type) ? parse_id(text) : std::nullopt;
    if (o.status == nsdb::Status::found) {
        ttl = names_dynamic_id(job.type, o.reply) ? 0 : options_.positive_ttl_s;
    } else if (o.status == nsdb::Status::not_found) {
        if (o.publish_not_found) {
            ttl = options_.positive_ttl_s;
        } else if (job.cache_negative && !(id && in_dynamic_range(*id))) {
            ttl = options_.negative_ttl_s;
        }
    } else {
        bump(counters_.nscd_jobs_unavailable);
    }
    // A module was down: the answer is what glibc would give now, not one to keep.
    if (o.incomplete) {
        ttl = 0;
        bump(counters_.nscd_jobs_unavailable);
    }
    // A flush since the job started: what it found may be what the flush was about.
    if (job.generation != maps_[job.db]->generation()) ttl = 0;
    if (!o.reply.empty() && ttl > 0) maps_[job.db]->publish(job.type, job.key, o.reply, ttl);
    set_levels();
    for (Waiter& w : waiters) {
        loop_.cancel_timer(w.timer);
        waiting_.erase(w.connection);
        if (RequestConnection* c = find_(w.connection)) c->send(o.reply);  // empty: closed
    }
}

void UserDatabases::drop_waiter(uint64_t token, uint64_t connection, bool timed_out) {
    auto it = jobs_.find(token);
    if (it == jobs_.end()) return;
    Job& job = it->second;
    for (auto w = job.waiters.begin(); w != job.waiters.end(); ++w) {
        if (w->connection != connection) continue;
        if (!timed_out) loop_.cancel_timer(w->timer);
        job.waiters.erase(w);
        break;
    }
    waiting_.erase(connection);
    if (timed_out) {
        bump(counters_.nscd_jobs_timed_out);
        // No reply: glibc asks NSS itself at once, not after its own 5 s.
        if (RequestConnection* c = find_(connection)) c->send({});
    }
    if (!job.waiters.empty()) return;
    pool_.cancel(token, job.user);
    forget_joinable(job.index_key, token);
    jobs_.erase(it);
}

void UserDatabases::forget_joinable(const std::string& index_key, uint64_t token) {
    auto j = joinable_.find(index_key);
    if (j == joinable_.end()) return;
    std::erase(j->second, token);
    if (j->second.empty()) joinable_.erase(j);
}

void UserDatabases::on_close(RequestConnection& connection) {
    auto it = waiting_.find(connection.id());
    if (it != waiting_.end()) drop_waiter(it->second, connection.id(), false);
    pool_.cancel(connection.id(), connection.peer_uid());
}

std::vector<uint8_t> UserDatabases::fd_reply(RequestType type, const std::string& name,
                                             int& fd) const {
    fd = -1;
    const Db db = type == GETFDPW ? kPasswd : type == GETFDGR ? kGroup : kServices;
    const Mode mode = state_[db].mode;
    if (type == GETFDNETGR || name != maps_[db]->name() || mode == Mode::decline ||
        mode == Mode::proxy) {
        return {};
    }
    return maps_[db]->fd_reply(fd);
}

bool UserDatabases::invalidate(const std::string& name) {
    for (size_t i = 0; i < kDbs; ++i) {
        if (name != maps_[i]->name()) continue;
        // What an operator runs when the watch missed a change (NFS, a file replaced under a
        // bind mount): the file is read again whatever it looks like, planned again (an NSS
        // module that failed to load is tried again) and the map emptied.
        reload_now(static_cast<Db>(i));
        maps_[i]->flush();
        set_levels();
        return true;
    }
    return false;
}

void UserDatabases::heartbeat(uint64_t now_s) {
    for (auto& m : maps_) m->heartbeat(now_s);
}

void UserDatabases::shutdown() {
    for (auto& m : maps_) m->shutdown();
}

}  // namespace nscache::nscd
