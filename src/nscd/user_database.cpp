// SPDX-License-Identifier: BSD-3-Clause
#include "nscd/user_database.h"

#include <cstring>
#include <fstream>
#include <sstream>

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
    nsdb::GroupListResult groups_of(const std::string& u, uint32_t g) override {
        return chain_.groups_of(u, g);
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

// The file's text; nullopt when it cannot be read.
std::optional<std::string> read_text(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return std::nullopt;
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
}

bool in_dynamic_range(uint32_t id) {
    return id >= kDynamicFirst && id <= kDynamicLast;
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
        maps_[i] = std::make_unique<PublishedMap>(loop_, counters_, options_.map, i + 1, kNames[i]);
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
                                            size_t compat_lines, bool readable,
                                            std::shared_ptr<ModuleSource>& modules) const {
    const DbPolicy policy = state_[db].policy;
    if (policy == DbPolicy::decline) return Mode::decline;
    if (policy == DbPolicy::proxy) return Mode::proxy;
    const nsdb::SourcePlan plan = nsdb::plan_for(line, compat_lines);
    // A file the daemon cannot read is one glibc's files module cannot either: its own calls
    // give the caller what they would without nscd.
    if (!readable || plan.plan == nsdb::Plan::proxy) {
        return policy == DbPolicy::cache ? Mode::cached_proxy : Mode::proxy;
    }
    if (plan.plan == nsdb::Plan::files_only) return Mode::files_only;
    modules = options_.sources(plan.modules);
    return Mode::files_then_modules;
}

void UserDatabases::reload() {
    bool changed[kDbs] = {false, false, false};
    auto nss = read_text(options_.nsswitch_path);
    // A missing nsswitch.conf is glibc's defaults; an unreadable one too, for want of better.
    std::string nss_text = nss.value_or("");
    bool replan = !nsswitch_read_ || nss_text != nsswitch_text_;
    nsswitch_text_ = std::move(nss_text);
    nsswitch_read_ = true;
    const std::string* paths[kDbs] = {&options_.passwd_path, &options_.group_path,
                                      &options_.services_path};
    for (size_t i = 0; i < kDbs; ++i) {
        auto text = read_text(*paths[i]);
        const bool readable = text.has_value();
        if (readable == state_[i].readable && (!readable || *text == state_[i].text) && !replan) {
            continue;
        }
        if (readable == state_[i].readable && (!readable || *text == state_[i].text)) {
            changed[i] = replan;
            continue;
        }
        changed[i] = true;
        state_[i].readable = readable;
        state_[i].text = text.value_or("");
        if (i == kPasswd) {
            passwd_ =
                readable ? std::optional(nsdb::PasswdFile::parse(state_[i].text)) : std::nullopt;
        } else if (i == kGroup) {
            group_ =
                readable ? std::optional(nsdb::GroupFile::parse(state_[i].text)) : std::nullopt;
        } else {
            services_ =
                readable ? std::optional(nsdb::ServicesFile::parse(state_[i].text)) : std::nullopt;
        }
    }
    // initgroups answers use the passwd file (is the user a files user?).
    if (changed[kPasswd]) changed[kGroup] = true;
    if (!replan && !changed[kPasswd] && !changed[kGroup] && !changed[kServices]) return;
    const nsdb::NsswitchConf conf = nsdb::NsswitchConf::parse(nsswitch_text_);
    for (size_t i = 0; i < kDbs; ++i) {
        if (!changed[i] && !replan) continue;
        State& s = state_[i];
        s.modules.reset();
        s.initgroups_modules.reset();
        const auto db = static_cast<Db>(i);
        if (db == kPasswd) {
            s.mode = mode_for(db, conf.line("passwd"), passwd_ ? passwd_->compat_lines() : 0,
                              s.readable, s.modules);
        } else if (db == kGroup) {
            const size_t compat = group_ ? group_->compat_lines() : 0;
            s.mode = mode_for(db, conf.line("group"), compat, s.readable, s.modules);
            // initgroups also needs the passwd file (the user's files entry).
            s.initgroups_mode = mode_for(db, conf.line("initgroups"), compat,
                                         s.readable && passwd_.has_value(), s.initgroups_modules);
        } else {
            s.mode = mode_for(db, conf.line("services"), 0, s.readable, s.modules);
        }
        maps_[i]->flush();
    }
    set_levels();
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
            if (!group_ || !final) return false;  // other sources add groups: a job
            const std::vector<uint32_t> gids = group_->groups_of(text);
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
    uint64_t token = 0;
    auto j = joinable_.find(index_key);
    // A job queued past half the deadline may be dropped unrun (a full pool): a newcomer then
    // starts its own rather than wait on it to its own deadline.
    if (j != joinable_.end() &&
        loop_.now_ms() >= jobs_.at(j->second).started_ms + options_.deadline_ms / 2) {
        joinable_.erase(j);
        j = joinable_.end();
    }
    if (j != joinable_.end()) {
        token = j->second;
        bump(counters_.nscd_jobs_coalesced);
    } else {
        token = kTokenBit | next_token_++;
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
                     files_groups = std::move(files_groups), files_user]() {
            return run_job(token, modules, type, text, cached_proxy, files_groups, files_user);
        };
        if (!pool_.submit_work(token, connection.peer_uid(), std::move(work),
                               loop_.now_ms() + options_.deadline_ms)) {
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
        job.user = connection.peer_uid();
        job.started_ms = loop_.now_ms();
        job.cache_negative = s.policy == DbPolicy::cache;
        jobs_.emplace(token, std::move(job));
        joinable_.emplace(std::move(index_key), token);
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
                                              std::vector<uint32_t> files_groups, bool files_user) {
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
            nsdb::GroupListResult r = m->groups_of(text, kNoGroup);
            if (r.status == nsdb::Status::unavailable) {
                o.status = r.status;
                break;
            }
            std::vector<uint32_t> all = files_groups;
            if (r.status == nsdb::Status::found) {
                for (uint32_t g : r.entry) {
                    bool seen = false;
                    for (uint32_t h : all) seen = seen || h == g;
                    if (!seen) all.push_back(g);
                }
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
    if (auto j = joinable_.find(job.index_key); j != joinable_.end() && j->second == token) {
        joinable_.erase(j);
    }
    uint32_t ttl = 0;
    std::string text;
    key_string(job.key, text);
    const std::optional<uint32_t> id = by_id(job.type) ? parse_id(text) : std::nullopt;
    if (o.status == nsdb::Status::found) {
        ttl = options_.positive_ttl_s;
    } else if (o.status == nsdb::Status::not_found) {
        if (o.publish_not_found) {
            ttl = options_.positive_ttl_s;
        } else if (job.cache_negative && !(id && in_dynamic_range(*id))) {
            ttl = options_.negative_ttl_s;
        }
    } else {
        bump(counters_.nscd_jobs_unavailable);
    }
    // A flush since the job started: what it found may be what the flush was about.
    if (job.generation != maps_[job.db]->generation()) ttl = 0;
    if (!o.reply.empty() && ttl > 0) maps_[job.db]->publish(job.type, job.key, o.reply, ttl);
    set_levels();
    for (Waiter& w : job.waiters) {
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
    if (auto j = joinable_.find(job.index_key); j != joinable_.end() && j->second == token) {
        joinable_.erase(j);
    }
    jobs_.erase(it);
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
