// SPDX-License-Identifier: BSD-3-Clause
// The passwd/group/services engine through the nscd socket (nscd_server.h), with files in a
// temp folder and a fake NSS source behind the files.
#include "nscd/user_database.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "front/front_test_support.h"
#include "nscd/nscd_server.h"

namespace nscache::nscd {
namespace {

using front::testing::connect_as_child;
using front::testing::FrontHarness;
using front::testing::held;
using front::testing::read_reply;
using front::testing::send_all;
using front::testing::write_file;

std::vector<uint8_t> request(RequestType type, const std::string& key_text) {
    std::vector<uint8_t> key(key_text.begin(), key_text.end());
    key.push_back(0);
    RequestHeader header{kProtocolVersion, type, static_cast<int32_t>(key.size())};
    std::vector<uint8_t> bytes(sizeof header + key.size());
    std::memcpy(bytes.data(), &header, sizeof header);
    std::memcpy(bytes.data() + sizeof header, key.data(), key.size());
    return bytes;
}

int32_t found_of(const std::vector<uint8_t>& reply) {
    int32_t found = -2;
    if (reply.size() >= 8) std::memcpy(&found, reply.data() + 4, sizeof found);
    return found;
}

// The sources after files: answers set by the test; calls counted; may be held at a gate.
class FakeSource final : public ModuleSource {
  public:
    nsdb::PasswdResult passwd_by_name(const std::string& name) override {
        wait(name);
        nsdb::PasswdResult r;
        r.status = status;
        if (status == nsdb::Status::found) r.entry = {name, "x", uid, uid, "", "/", "/bin/sh"};
        return r;
    }
    nsdb::PasswdResult passwd_by_uid(uint32_t uid) override {
        wait();
        nsdb::PasswdResult r;
        r.status = status;
        if (status == nsdb::Status::found) r.entry = {"dyn", "x", uid, uid, "", "/", "/bin/sh"};
        return r;
    }
    nsdb::GroupResult group_by_name(const std::string&) override { return {status, {}}; }
    nsdb::GroupResult group_by_gid(uint32_t) override { return {status, {}}; }
    nsdb::GroupListResult groups_of(const std::string&, uint32_t, bool) override {
        wait();
        nsdb::GroupListResult r;
        r.status = status;
        if (status == nsdb::Status::found) r.entry = {900};
        return r;
    }
    nsdb::ServiceResult service_by_name(const std::string&, const std::string&) override {
        return {status, {}};
    }
    nsdb::ServiceResult service_by_port(int32_t, const std::string&) override {
        return {status, {}};
    }

    // Held while the gate is shut: every call, or with hold_prefix set only the names it
    // starts.
    void wait(const std::string& name = "") {
        ++calls;
        if (!hold_prefix.empty() && name.rfind(hold_prefix, 0) != 0) return;
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [this] { return open; });
    }
    void release() {
        {
            std::lock_guard<std::mutex> lock(mu);
            open = true;
        }
        cv.notify_all();
    }

    std::atomic<nsdb::Status> status{nsdb::Status::not_found};
    std::atomic<int> calls{0};
    std::atomic<uint32_t> uid{70000};
    std::mutex mu;
    std::condition_variable cv;
    bool open = true;
    std::string hold_prefix;  // set before the first job
};

constexpr const char* kPasswd =
    "root:x:0:0:root:/root:/bin/bash\n"
    "alice:x:1000:1000:Alice:/home/alice:/bin/sh\n";
constexpr const char* kGroup =
    "root:x:0:\n"
    "staff:x:50:alice,bob\n"
    "alice:x:1000:\n";
constexpr const char* kServices = "http 80/tcp www\n";

struct Harness {
    explicit Harness(const std::string& nsswitch, DbPolicy policy = DbPolicy::automatic,
                     const std::function<void(UserDbOptions&)>& tweak = {})
        : source(std::make_shared<FakeSource>()) {
        write_file(path("passwd"), kPasswd);
        write_file(path("group"), kGroup);
        write_file(path("services"), kServices);
        write_file(path("nsswitch.conf"), nsswitch);
        NscdOptions o;
        o.socket_path = path("nscd.sock");
        o.proxy_other_databases = false;
        o.proxy_threads = 4;
        o.map = MapOptions{.module = 211, .data_size = 1u << 20, .certainly_running = false};
        o.users.passwd = o.users.group = o.users.services = policy;
        o.users.map = o.map;
        o.users.passwd_path = path("passwd");
        o.users.group_path = path("group");
        o.users.services_path = path("services");
        o.users.nsswitch_path = path("nsswitch.conf");
        o.users.sources = [s = source](const std::vector<std::string>&) { return s; };
        if (tweak) tweak(o.users);
        nscd = std::make_unique<NscdServer>(h.front, o);
        const Result<void> opened = nscd->open();
        EXPECT_TRUE(opened) << (opened ? "" : opened.error());
        h.front.run_on_this_thread();
    }
    ~Harness() {
        source->release();
        h.front.stop();
    }
    std::string path(const std::string& name) const { return h.socket_path(name); }
    UserDatabases& users() { return nscd->user_databases(); }

    int open_request(RequestType type, const std::string& key, uid_t uid = ~uid_t{0}) {
        const int fd = connect_as_child(path("nscd.sock"), uid);
        EXPECT_GE(fd, 0);
        send_all(fd, request(type, key));
        return fd;
    }
    // Loop turns until `fd` has its answer (the pool's jobs finish on other threads).
    std::vector<uint8_t> answer(int fd, bool* closed = nullptr) {
        for (int i = 0; i < 400 && held(fd); ++i) h.front.run_once(5);
        std::vector<uint8_t> reply = read_reply(fd, closed);
        close(fd);
        return reply;
    }
    std::vector<uint8_t> ask(RequestType type, const std::string& key, bool* closed = nullptr) {
        const int fd = open_request(type, key);
        h.turns();
        return answer(fd, closed);
    }

    FrontHarness h;
    std::shared_ptr<FakeSource> source;
    std::unique_ptr<NscdServer> nscd;
};

constexpr const char* kFilesOnly = "passwd: files\ngroup: files\nservices: files\n";
constexpr const char* kHybrid = "passwd: files fake\ngroup: files fake\nservices: files fake\n";

TEST(UserDatabases, FilesOnlyAnswersFoundAndNotFoundAndPublishesBoth) {
    Harness t(kFilesOnly);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "alice")), 1);
    // By name, and by uid (the same entry is what getpwuid gives).
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 2u);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "nobody-here")), 0);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 3u);
    EXPECT_EQ(found_of(t.ask(GETGRBYGID, "50")), 1);
    EXPECT_EQ(found_of(t.ask(INITGROUPS, "alice")), 1);
    EXPECT_EQ(found_of(t.ask(GETSERVBYNAME, "http/tcp")), 1);
    EXPECT_EQ(found_of(t.ask(GETSERVBYPORT, std::to_string(htons(80)) + "/tcp")), 1);
    EXPECT_EQ(found_of(t.ask(GETSERVBYPORT, "80/tcp")), 0);  // host order: port 20480
    EXPECT_EQ(t.source->calls.load(), 0);
    EXPECT_EQ(t.h.counters.nscd_passwd_hits.load(), 2u);
    EXPECT_EQ(t.users().plan_code(UserDatabases::kPasswd), 2);
}

TEST(UserDatabases, HybridNotFoundIsAnsweredButNeverPublished) {
    Harness t(kHybrid);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "root")), 1);  // from the files
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 2u);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "ghost")), 0);
    EXPECT_EQ(t.source->calls.load(), 1);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 2u);  // a dynamic user may come
    t.source->status = nsdb::Status::found;
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "ghost")), 1);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 3u);
    EXPECT_EQ(t.h.counters.nscd_passwd_misses.load(), 2u);
    EXPECT_EQ(t.users().plan_code(UserDatabases::kPasswd), 3);
}

TEST(UserDatabases, AnUnavailableSourceGetsNoReplyAndNothingCached) {
    Harness t(kHybrid, DbPolicy::cache);
    t.source->status = nsdb::Status::unavailable;
    bool closed = false;
    EXPECT_TRUE(t.ask(GETPWBYNAME, "ghost", &closed).empty());
    EXPECT_TRUE(closed);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 0u);
    EXPECT_EQ(t.h.counters.nscd_jobs_unavailable.load(), 1u);
}

TEST(UserDatabases, InitgroupsWithAModuleDownAnswersTheGroupsCollectedUnpublished) {
    Harness t(kHybrid, DbPolicy::cache);
    t.source->status = nsdb::Status::unavailable;
    std::vector<uint8_t> reply = t.ask(INITGROUPS, "alice");
    EXPECT_EQ(found_of(reply), 1);  // staff, from the files
    ASSERT_EQ(reply.size(), 12u + 4u);
    int32_t gid = 0;
    std::memcpy(&gid, reply.data() + 12, sizeof gid);
    EXPECT_EQ(gid, 50);
    EXPECT_EQ(found_of(t.ask(INITGROUPS, "carol")), 0);  // nothing collected: still a reply
    EXPECT_EQ(t.users().map_entries(UserDatabases::kGroup), 0u);
    EXPECT_EQ(t.h.counters.nscd_jobs_unavailable.load(), 2u);
    // By name, still no reply.
    bool closed = false;
    EXPECT_TRUE(t.ask(GETPWBYNAME, "ghost", &closed).empty());
    EXPECT_TRUE(closed);
}

TEST(UserDatabases, CacheKeepsNegativesButNeverInTheDynamicRange) {
    Harness t(kHybrid, DbPolicy::cache);
    EXPECT_EQ(found_of(t.ask(GETPWBYUID, "61200")), 0);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 0u);
    EXPECT_EQ(found_of(t.ask(GETPWBYUID, "4000")), 0);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 1u);
}

TEST(UserDatabases, AFoundEntryInTheDynamicRangeIsAnsweredButNotPublished) {
    for (DbPolicy policy : {DbPolicy::automatic, DbPolicy::cache}) {
        Harness t(kHybrid, policy);
        t.source->status = nsdb::Status::found;
        EXPECT_EQ(found_of(t.ask(GETPWBYUID, "61300")), 1);
        t.source->uid = 61234;
        EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "dyn-svc")), 1);
        EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 0u);
        t.source->uid = 70000;
        EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "ldap-user")), 1);
        EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 1u);
    }
}

TEST(UserDatabases, AnInitgroupsLineOfItsOwnStopsAtTheFilesSuccess) {
    Harness t("passwd: files fake\ngroup: files fake\ninitgroups: files fake\n");
    t.source->status = nsdb::Status::found;
    EXPECT_EQ(found_of(t.ask(INITGROUPS, "alice")), 1);  // in staff: the files succeed
    EXPECT_EQ(t.source->calls.load(), 0);
    EXPECT_EQ(found_of(t.ask(INITGROUPS, "carol")), 1);  // in no files group: the module
    EXPECT_EQ(t.source->calls.load(), 1);
    Harness merged(kHybrid);  // no initgroups line: every source, merged
    merged.source->status = nsdb::Status::found;
    EXPECT_EQ(found_of(merged.ask(INITGROUPS, "alice")), 1);
    EXPECT_EQ(merged.source->calls.load(), 1);
}

TEST(UserDatabases, IdenticalLookupsInFlightShareOneJob) {
    Harness t(kHybrid);
    t.source->open = false;
    std::vector<int> fds;
    for (int i = 0; i < 3; ++i) {
        fds.push_back(t.open_request(GETPWBYNAME, "ghost"));
        t.h.turns();
    }
    EXPECT_EQ(t.users().jobs_in_flight(), 1u);
    EXPECT_EQ(t.h.counters.nscd_jobs_coalesced.load(), 2u);
    t.source->release();
    for (int fd : fds) EXPECT_EQ(found_of(t.answer(fd)), 0);
    EXPECT_EQ(t.source->calls.load(), 1);
}

TEST(UserDatabases, AJobQueuedByOneUserIsNeverJoinedByAnother) {
    if (getuid() != 0) GTEST_SKIP() << "two client uids need root";
    Harness t(kHybrid);  // 4 pool threads: at most 2 per user
    t.source->hold_prefix = "slow";
    t.source->open = false;
    constexpr uid_t kAttacker = 64001;
    constexpr uid_t kVictim = 64002;
    std::vector<int> held_fds;
    for (const char* name : {"slow1", "slow2"}) {
        held_fds.push_back(t.open_request(GETPWBYNAME, name, kAttacker));
        t.h.turns();
    }
    // Queued behind the attacker's two stuck lookups.
    const int queued = t.open_request(GETPWBYNAME, "victim", kAttacker);
    t.h.turns();
    const int victim = t.open_request(GETPWBYNAME, "victim", kVictim);
    EXPECT_EQ(found_of(t.answer(victim)), 0);  // its own copy ran on a free thread
    // The first copy to finish answered the attacker's queued copy too.
    EXPECT_EQ(found_of(t.answer(queued)), 0);
    EXPECT_EQ(t.users().jobs_in_flight(), 2u);
    // A job already running on a pool thread may be joined by anyone.
    const int again = t.open_request(GETPWBYNAME, "slow1", kVictim);
    t.h.turns();
    EXPECT_EQ(t.h.counters.nscd_jobs_coalesced.load(), 1u);
    t.source->release();
    for (int fd : held_fds) EXPECT_EQ(found_of(t.answer(fd)), 0);
    EXPECT_EQ(found_of(t.answer(again)), 0);
    EXPECT_EQ(t.source->calls.load(), 3);  // the attacker's queued copy never ran
}

TEST(UserDatabases, AClientWaitingPastTheDeadlineIsClosedWithoutAReply) {
    Harness t(kHybrid);
    t.source->open = false;
    const int fd = t.open_request(GETPWBYNAME, "slow");
    t.h.turns();
    t.h.clock.advance_ms(2499);
    t.h.turns();
    EXPECT_TRUE(held(fd));
    t.h.clock.advance_ms(1);
    t.h.turns();
    EXPECT_FALSE(held(fd));
    bool closed = false;
    EXPECT_TRUE(read_reply(fd, &closed).empty());
    EXPECT_TRUE(closed);
    close(fd);
    EXPECT_EQ(t.h.counters.nscd_jobs_timed_out.load(), 1u);
    EXPECT_EQ(t.users().jobs_in_flight(), 0u);
}

TEST(UserDatabases, ASlowSourceDelaysNeitherHostsNorFilesAnswers) {
    Harness t(kHybrid);
    t.source->open = false;
    const int slow = t.open_request(GETPWBYNAME, "slow");
    t.h.turns();
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "alice")), 1);  // from the files, at once
    EXPECT_EQ(found_of(t.ask(GETHOSTBYNAME, "one")), 1);  // hosts: the front's own thread
    EXPECT_TRUE(held(slow));
    t.source->release();
    EXPECT_EQ(found_of(t.answer(slow)), 0);
}

TEST(UserDatabases, AJobWhoseClientsAllLeftIsDropped) {
    Harness t(kHybrid);
    t.source->open = false;
    const int fd = t.open_request(GETPWBYNAME, "gone");
    t.h.turns();
    ASSERT_EQ(t.users().jobs_in_flight(), 1u);
    close(fd);
    t.h.turns();
    EXPECT_EQ(t.users().jobs_in_flight(), 0u);
    t.source->release();
}

TEST(UserDatabases, InvalidateFromRootFlushesThatDatabase) {
    Harness t(kFilesOnly);
    t.ask(GETPWBYNAME, "alice");
    t.ask(GETGRBYNAME, "staff");
    ASSERT_EQ(t.users().map_entries(UserDatabases::kPasswd), 2u);
    if (getuid() == 0) {
        // Another user may not.
        const int fd = t.open_request(INVALIDATE, "passwd", 65534);
        t.h.turns();
        EXPECT_TRUE(t.answer(fd).empty());
        EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 2u);
    }
    const std::vector<uint8_t> done = t.ask(INVALIDATE, "passwd");
    if (getuid() != 0) GTEST_SKIP() << "INVALIDATE needs root";
    EXPECT_EQ(done.size(), sizeof(int32_t));
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 0u);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kGroup), 2u);
}

TEST(UserDatabases, InvalidateReadsTheFileAgainEvenWhenTheWatchMissedIt) {
    if (getuid() != 0) GTEST_SKIP() << "INVALIDATE needs root";
    Harness t(kFilesOnly);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "carol")), 0);
    // Changed behind the watch's back (no reload): only INVALIDATE can tell.
    write_file(t.path("passwd"), std::string(kPasswd) + "carol:x:1001:1001::/:/bin/sh\n");
    EXPECT_EQ(t.ask(INVALIDATE, "passwd").size(), sizeof(int32_t));
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "carol")), 1);
}

TEST(UserDatabases, AnEditOfTheFileFlushesItsMapIncludingANegative) {
    Harness t(kFilesOnly);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "carol")), 0);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 1u);
    write_file(t.path("passwd"), std::string(kPasswd) + "carol:x:1001:1001::/:/bin/sh\n");
    t.users().reload();
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), 0u);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "carol")), 1);
}

TEST(UserDatabases, AWatchEventReadsOnlyTheFilesThatChanged) {
    // The files' clock 10 s on: past the window in which a stat cannot tell two writes apart.
    Harness t(kFilesOnly, DbPolicy::automatic,
              [](UserDbOptions& o) { o.wall_s = [] { return time(nullptr) + 10; }; });
    const uint64_t reads = t.users().files_read();
    t.users().reload();
    EXPECT_EQ(t.users().files_read(), reads);
    write_file(t.path("group"), std::string(kGroup) + "extra:x:77:\n");
    t.users().reload();
    EXPECT_EQ(t.users().files_read(), reads + 1);
    EXPECT_EQ(found_of(t.ask(GETGRBYNAME, "extra")), 1);
}

TEST(UserDatabases, AnOversizedFileIsUnreadableAndItsDatabaseProxied) {
    Harness t(kFilesOnly, DbPolicy::automatic,
              [](UserDbOptions& o) { o.max_file_bytes = std::strlen(kPasswd); });
    EXPECT_EQ(t.users().plan_code(UserDatabases::kGroup), 2);
    write_file(t.path("group"), std::string(kGroup) + "extra:x:77:" + std::string(40, 'm') + "\n");
    t.users().reload();
    EXPECT_EQ(t.users().plan_code(UserDatabases::kGroup), 1);  // proxy
    EXPECT_EQ(t.users().plan_code(UserDatabases::kPasswd), 2);
}

TEST(UserDatabases, AChangedNsswitchConfReplans) {
    Harness t(kFilesOnly);
    EXPECT_EQ(t.users().plan_code(UserDatabases::kGroup), 2);
    write_file(t.path("nsswitch.conf"), kHybrid);
    t.users().reload();
    EXPECT_EQ(t.users().plan_code(UserDatabases::kGroup), 3);
}

// The log says how each database is served (the policy alone does not: auto may proxy), at
// start and again for each database whose plan a replan changes.
TEST(UserDatabases, TheLogGivesThePlanAtStartAndWhenAReplanChangesIt) {
    ::testing::internal::CaptureStderr();
    auto t = std::make_unique<Harness>(
        "passwd: files fake\ngroup: files [NOTFOUND=return] fake\nservices: files\n");
    const std::string start = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(start.find("nscd passwd: files then fake\n"), std::string::npos) << start;
    EXPECT_NE(start.find("nscd group: proxy (its nsswitch.conf line has [actions])\n"),
              std::string::npos)
        << start;
    EXPECT_NE(start.find("nscd services: files only\n"), std::string::npos) << start;
    EXPECT_EQ(t->users().plan_text(UserDatabases::kPasswd), "files then fake");

    ::testing::internal::CaptureStderr();
    write_file(t->path("nsswitch.conf"),
               "passwd: files fake\ngroup: files\ninitgroups: files fake\nservices: files\n");
    t->users().reload();
    const std::string replan = ::testing::internal::GetCapturedStderr();
    EXPECT_NE(replan.find("nscd group: files only; initgroups: files then fake (its own line: "
                          "the first success ends it)\n"),
              std::string::npos)
        << replan;
    EXPECT_EQ(replan.find("nscd passwd:"), std::string::npos) << replan;  // unchanged
    EXPECT_EQ(replan.find("nscd services:"), std::string::npos) << replan;
}

TEST(UserDatabases, TheLogSaysWhyADatabaseIsProxiedOrDeclined) {
    {
        Harness t("passwd: ldap files\ngroup: files\nservices: files\n");
        EXPECT_EQ(t.users().plan_text(UserDatabases::kPasswd),
                  "proxy (its nsswitch.conf line starts with ldap, not files)");
    }
    {
        Harness t(kHybrid, DbPolicy::decline);
        EXPECT_EQ(t.users().plan_text(UserDatabases::kGroup), "decline");
    }
    {
        Harness t(kHybrid, DbPolicy::proxy);
        EXPECT_EQ(t.users().plan_text(UserDatabases::kServices),
                  "proxy (nscd-services = \"proxy\")");
    }
    {
        Harness t(kFilesOnly, DbPolicy::automatic,
                  [](UserDbOptions& o) { o.max_file_bytes = std::strlen(kPasswd) - 1; });
        EXPECT_EQ(t.users().plan_text(UserDatabases::kPasswd),
                  "proxy (" + t.path("passwd") + " unreadable)");
        // initgroups needs the passwd file too.
        EXPECT_EQ(t.users().plan_text(UserDatabases::kGroup),
                  "files only; initgroups: proxy (" + t.path("passwd") + " unreadable)");
    }
}

TEST(UserDatabases, AReplanStopsNewcomersJoiningOldJobs) {
    Harness t(kHybrid);
    t.source->open = false;
    const int before = t.open_request(GETPWBYNAME, "ghost");
    t.h.turns();
    write_file(t.path("nsswitch.conf"), "passwd: files other\ngroup: files fake\n");
    t.users().reload();
    const int after = t.open_request(GETPWBYNAME, "ghost");
    t.h.turns();
    EXPECT_EQ(t.users().jobs_in_flight(), 2u);
    EXPECT_EQ(t.h.counters.nscd_jobs_coalesced.load(), 0u);
    t.source->release();
    EXPECT_EQ(found_of(t.answer(before)), 0);
    EXPECT_EQ(found_of(t.answer(after)), 0);
}

TEST(UserDatabases, GetfdHandsOutEachDatabasesMapByName) {
    Harness t(kFilesOnly);
    const std::vector<uint8_t> reply = t.ask(GETFDPW, "passwd");
    ASSERT_GE(reply.size(), 7u + 8u);
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(reply.data()), 7),
              std::string("passwd\0", 7));
    EXPECT_TRUE(t.ask(GETFDPW, "group").empty());  // the name must match the request
    EXPECT_EQ(t.ask(GETFDSERV, "services").size(), 9u + 8u);
}

// The record of `key` (as sent, with its NUL) in the map `fd` hands out, found as glibc's
// client finds it (nscd_helper.c __nscd_cache_search: key_hash % the head's module); "" if none.
std::string map_lookup(int fd, RequestType type, const std::vector<uint8_t>& key) {
    struct stat st {};
    if (fstat(fd, &st) != 0) return "";
    const auto size = static_cast<size_t>(st.st_size);
    void* base = mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) return "";
    const auto* h = static_cast<const MapHead*>(base);
    const auto* buckets = reinterpret_cast<const uint32_t*>(h + 1);
    const uint8_t* data = static_cast<const uint8_t*>(base) + sizeof(MapHead) +
                          round_up(size_t(h->module) * 4, kAlign);
    std::string found;
    for (uint32_t at = buckets[key_hash(key.data(), key.size()) % uint32_t(h->module)];
         at != kEndRef;) {
        const auto* he = reinterpret_cast<const HashEntry*>(data + at);
        const auto* dh = reinterpret_cast<const DataHead*>(data + he->packet);
        if (he->type == type && size_t(he->len) == key.size() &&
            std::memcmp(data + he->key, key.data(), key.size()) == 0 && dh->usable) {
            found.assign(reinterpret_cast<const char*>(dh + 1), size_t(dh->recsize));
            break;
        }
        at = he->next;
    }
    munmap(base, size);
    return found;
}

std::vector<uint8_t> key_of(const std::string& text) {
    std::vector<uint8_t> key(text.begin(), text.end());
    key.push_back(0);
    return key;
}

// bench/RESULTS.md "User databases": every map had 32749 buckets, a 128 KiB array that costs
// glibc's client a level-1 miss a lookup on a small database. Each map's bucket count now
// follows its files: 318 services a few hundred buckets, 10,000 users 20,011.
TEST(UserDatabases, EachMapsBucketCountFollowsItsFiles) {
    std::string services;
    for (int i = 0; i < 318; ++i)
        services += "svc" + std::to_string(i) + " " + std::to_string(1000 + i) + "/tcp\n";
    std::string passwd;
    for (int i = 0; i < 10'000; ++i) {
        passwd +=
            "u" + std::to_string(i) + ":x:" + std::to_string(20'000 + i) + ":100::/:/bin/sh\n";
    }
    Harness t(kFilesOnly, DbPolicy::automatic, [&](UserDbOptions& o) {
        o.map.module = 32749;
        o.map.data_size = 8u << 20;
        write_file(o.services_path, services);
        write_file(o.passwd_path, passwd);
    });
    EXPECT_EQ(t.users().map_buckets(UserDatabases::kServices), bucket_count_for(636, 32749));
    EXPECT_LT(t.users().map_buckets(UserDatabases::kServices), 1024u);
    EXPECT_EQ(t.users().map_buckets(UserDatabases::kPasswd), 20011u);
    EXPECT_EQ(t.users().map_buckets(UserDatabases::kGroup), bucket_count_for(10'006, 32749));
    for (int i = 0; i < 318; i += 7) {
        EXPECT_EQ(found_of(t.ask(GETSERVBYNAME, "svc" + std::to_string(i) + "/tcp")), 1);
    }
    for (int i = 0; i < 10'000; i += 499) {
        EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "u" + std::to_string(i))), 1);
    }
    int fd = -1;
    t.users().fd_reply(GETFDSERV, "services", fd);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 318; i += 7) {
        EXPECT_NE(map_lookup(fd, GETSERVBYNAME, key_of("svc" + std::to_string(i) + "/tcp")), "");
    }
    t.users().fd_reply(GETFDPW, "passwd", fd);
    ASSERT_GE(fd, 0);
    for (int i = 0; i < 10'000; i += 499) {
        EXPECT_NE(map_lookup(fd, GETPWBYNAME, key_of("u" + std::to_string(i))), "");
        EXPECT_NE(map_lookup(fd, GETPWBYUID, key_of(std::to_string(20'000 + i))), "");
    }
}

// Review of issue 18, item 8: any local user can ask for names nobody has; each was a record
// for nscd-positive-ttl in the map and its writer's index. 10,000 of them leave the map at
// its bound, every answer still right (the socket answers from the files index).
TEST(UserDatabases, UnknownNamesKeepTheMapsNegativeRecordsAtTheBound) {
    Harness t(kFilesOnly);
    int wrong = 0;
    for (int i = 0; i < 10'000; ++i) {
        wrong += found_of(t.ask(GETPWBYNAME, "ghost-" + std::to_string(i))) != 0;
    }
    EXPECT_EQ(wrong, 0);
    EXPECT_EQ(t.users().map_negatives(UserDatabases::kPasswd), UserDatabases::kMaxNegativeRecords);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd), UserDatabases::kMaxNegativeRecords);
    // Found entries are still published, and those past the bound still answered.
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "alice")), 1);
    EXPECT_EQ(t.users().map_entries(UserDatabases::kPasswd),
              UserDatabases::kMaxNegativeRecords + 2);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "ghost-9999")), 0);
    int fd = -1;
    t.users().fd_reply(GETFDPW, "passwd", fd);
    ASSERT_GE(fd, 0);
    EXPECT_NE(map_lookup(fd, GETPWBYNAME, key_of("ghost-0")), "");
    EXPECT_EQ(map_lookup(fd, GETPWBYNAME, key_of("ghost-9999")), "");
    // A flush lets them all go: new ones are published again.
    ASSERT_TRUE(t.users().invalidate("passwd"));
    EXPECT_EQ(t.users().map_negatives(UserDatabases::kPasswd), 0u);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "ghost-9999")), 0);
    EXPECT_EQ(t.users().map_negatives(UserDatabases::kPasswd), 1u);
}

TEST(UserDatabases, DeclineAndNetgroupSayNotServedHere) {
    Harness t(kFilesOnly, DbPolicy::decline);
    EXPECT_EQ(found_of(t.ask(GETPWBYNAME, "alice")), -1);
    EXPECT_EQ(found_of(t.ask(GETNETGRENT, "trusted")), -1);
    EXPECT_TRUE(t.ask(GETFDPW, "passwd").empty());
    EXPECT_EQ(t.h.counters.nscd_passwd_declined.load(), 1u);
    EXPECT_EQ(t.h.counters.nscd_netgroup_declined.load(), 1u);
}

}  // namespace
}  // namespace nscache::nscd
