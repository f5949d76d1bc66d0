// SPDX-License-Identifier: BSD-3-Clause
// The modules' entry points are glibc's NSS module interface (nss/nss_module.h and the
// functions each module exports, e.g. nss/nss_files/files-pwd.c): enum nss_status
// fn(key..., struct X* result, char* buffer, size_t buflen, int* errnop), with TRYAGAIN and
// *errnop == ERANGE meaning "give me a larger buffer". glibc passes &errno as errnop, and some
// modules set errno rather than *errnop, so errno is what is read here too.
#include "nsdb/module_chain.h"

#include <dlfcn.h>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <map>

#include "common/clock.h"
#include "common/log.h"
#include "common/mutex.h"

namespace nscache::nsdb {
namespace {

// enum nss_status (nss.h), spelled out so this file does not depend on <nss.h>'s C enum.
constexpr int kTryAgain = -2;
constexpr int kSuccess = 1;
constexpr int kNotFound = 0;

// Every lookup starts at 1 KiB (most entries fit) and doubles on ERANGE up to 1 MiB: a group
// with tens of thousands of members still fits, a module that always says ERANGE does not
// make us allocate without end.
constexpr size_t kFirstBuffer = 1024;
constexpr size_t kMaxBuffer = 1u << 20;
// The enumeration fallback of groups_of reads at most this many groups: a directory that
// enumerates without end must not hold a pool thread for ever.
constexpr size_t kMaxEnumerated = 1000000;

using GetPwNam = int (*)(const char*, passwd*, char*, size_t, int*);
using GetPwUid = int (*)(uid_t, passwd*, char*, size_t, int*);
using GetGrNam = int (*)(const char*, group*, char*, size_t, int*);
using GetGrGid = int (*)(gid_t, group*, char*, size_t, int*);
using InitgroupsDyn = int (*)(const char*, gid_t, long*, long*, gid_t**, long, int*);
using GetServByName = int (*)(const char*, const char*, servent*, char*, size_t, int*);
using GetServByPort = int (*)(int, const char*, servent*, char*, size_t, int*);
using SetGrEnt = int (*)();
using GetGrEntR = int (*)(group*, char*, size_t, int*);
using EndGrEnt = int (*)();

// A module that failed to load (not installed yet: an image build, a package installed after
// the daemon started) is tried again when a chain is next built (a replan) and otherwise at
// most this often: a dlopen that fails searches the folders again, too costly for every
// lookup, and without a retry every name not in the files would be "not found" until a
// restart.
constexpr uint64_t kRetryMs = 60'000;

// One libnss_<service>.so.2, shared by every chain in the process: the module's own
// state (its getgrent position, its connections) is per process, so its enumeration lock
// must be too. Once loaded, never unloaded (as glibc keeps its modules: one may have
// started threads or registered handlers), and its function pointers never change again.
struct Library {
    std::string name;
    std::string path;
    // Set (release) once the pointers below are written: from then on they are read
    // without the lock.
    std::atomic<bool> ready{false};
    // A chain was built since the last failed attempt: try again at the next use.
    std::atomic<bool> retry_due{false};
    Mutex load_mu;
    bool attempted NSCACHE_GUARDED_BY(load_mu) = false;
    uint64_t last_attempt_ms NSCACHE_GUARDED_BY(load_mu) = 0;
    uint64_t failures NSCACHE_GUARDED_BY(load_mu) = 0;
    void* handle = nullptr;
    GetPwNam getpwnam = nullptr;
    GetPwUid getpwuid = nullptr;
    GetGrNam getgrnam = nullptr;
    GetGrGid getgrgid = nullptr;
    InitgroupsDyn initgroups_dyn = nullptr;
    GetServByName getservbyname = nullptr;
    GetServByPort getservbyport = nullptr;
    SetGrEnt setgrent = nullptr;
    GetGrEntR getgrent_r = nullptr;
    EndGrEnt endgrent = nullptr;
    Mutex enumeration_mu;  // setgrent..endgrent is one stateful walk per module

    // Whether the module is loaded, loading it if it is due (first use, a chain built
    // since, or kRetryMs since the last attempt at `now_ms`).
    bool installed(uint64_t now_ms) {
        if (ready.load(std::memory_order_acquire)) return true;
        MutexLock lock(load_mu);
        if (ready.load(std::memory_order_relaxed)) return true;
        const bool due = retry_due.exchange(false) || !attempted || now_ms < last_attempt_ms ||
                         now_ms - last_attempt_ms >= kRetryMs;
        if (!due) return false;
        attempted = true;
        last_attempt_ms = now_ms;
        void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h == nullptr) {
            const char* why = dlerror();
            // Logged once: a retry that fails again says nothing new.
            if (failures++ == 0) {
                log_warning(
                    "nsdb: NSS module %s not loaded (%s): skipped, tried again on a "
                    "replan or after a minute",
                    path.c_str(), why != nullptr ? why : "unknown error");
            }
            return false;
        }
        handle = h;
        auto sym = [this](const char* fn) {
            std::string symbol = "_nss_" + name + "_" + fn;
            return dlsym(handle, symbol.c_str());
        };
        getpwnam = reinterpret_cast<GetPwNam>(sym("getpwnam_r"));
        getpwuid = reinterpret_cast<GetPwUid>(sym("getpwuid_r"));
        getgrnam = reinterpret_cast<GetGrNam>(sym("getgrnam_r"));
        getgrgid = reinterpret_cast<GetGrGid>(sym("getgrgid_r"));
        initgroups_dyn = reinterpret_cast<InitgroupsDyn>(sym("initgroups_dyn"));
        getservbyname = reinterpret_cast<GetServByName>(sym("getservbyname_r"));
        getservbyport = reinterpret_cast<GetServByPort>(sym("getservbyport_r"));
        setgrent = reinterpret_cast<SetGrEnt>(sym("setgrent"));
        getgrent_r = reinterpret_cast<GetGrEntR>(sym("getgrent_r"));
        endgrent = reinterpret_cast<EndGrEnt>(sym("endgrent"));
        if (failures > 0) log_info("nsdb: NSS module %s loaded on a retry", path.c_str());
        ready.store(true, std::memory_order_release);
        return true;
    }
};

Library& library_for(const std::string& folder, const std::string& service) {
    static Mutex mu;
    // Leaked on purpose: modules stay loaded until exit, and no static destructor may run
    // while a pool thread is still inside one.
    static auto* libraries = new std::map<std::string, std::unique_ptr<Library>>();
    std::string file = "libnss_" + service + ".so.2";
    std::string path = folder.empty() ? file : folder + "/" + file;
    MutexLock lock(mu);
    std::unique_ptr<Library>& lib = (*libraries)[path];
    if (!lib) {
        lib = std::make_unique<Library>();
        lib->name = service;
        lib->path = path;
    }
    return *lib;
}

std::string text_of(const char* s) {
    return s != nullptr ? std::string(s) : std::string();
}

std::vector<std::string> list_of(char** items) {
    std::vector<std::string> out;
    for (size_t i = 0; items != nullptr && items[i] != nullptr; ++i) out.emplace_back(items[i]);
    return out;
}

PasswdEntry copy_of(const passwd& pw) {
    return PasswdEntry{.name = text_of(pw.pw_name),
                       .passwd = text_of(pw.pw_passwd),
                       .uid = pw.pw_uid,
                       .gid = pw.pw_gid,
                       .gecos = text_of(pw.pw_gecos),
                       .dir = text_of(pw.pw_dir),
                       .shell = text_of(pw.pw_shell)};
}

GroupEntry copy_of(const group& gr) {
    return GroupEntry{.name = text_of(gr.gr_name),
                      .passwd = text_of(gr.gr_passwd),
                      .gid = gr.gr_gid,
                      .members = list_of(gr.gr_mem)};
}

ServiceEntry copy_of(const servent& se) {
    return ServiceEntry{.name = text_of(se.s_name),
                        .aliases = list_of(se.s_aliases),
                        .port = se.s_port,
                        .proto = text_of(se.s_proto)};
}

// One call of a module's getXXbyYY_r: `call(result, buffer, size, errnop)` grown on ERANGE.
// Returns the nss_status, with a buffer past kMaxBuffer reported as TRYAGAIN (unavailable).
template <typename Raw, typename Call>
int call_growing(Raw& raw, std::vector<char>& buffer, Call&& call) {
    buffer.resize(kFirstBuffer);
    for (;;) {
        errno = 0;
        int status = call(&raw, buffer.data(), buffer.size(), &errno);
        if (status != kTryAgain || errno != ERANGE) return status;
        if (buffer.size() >= kMaxBuffer) return kTryAgain;
        buffer.resize(buffer.size() * 2);
    }
}

// Each module in turn until one says SUCCESS. `fn_of` picks the function (null: the module
// does not have it, which glibc reads as UNAVAIL); `lookup` calls it.
template <typename Entry, typename Raw, typename FnOf, typename Lookup>
Found<Entry> first_found(const std::vector<Library*>& libs, uint64_t now_ms, FnOf&& fn_of,
                         Lookup&& lookup) {
    Found<Entry> result;
    bool failed = false;
    for (Library* lib : libs) {
        if (!lib->installed(now_ms)) continue;
        auto fn = fn_of(*lib);
        if (fn == nullptr) {
            failed = true;
            continue;
        }
        Raw raw{};
        std::vector<char> buffer;
        int status = call_growing(
            raw, buffer, [&](Raw* r, char* b, size_t n, int* e) { return lookup(fn, r, b, n, e); });
        if (status == kSuccess) {
            result.status = Status::found;
            result.entry = copy_of(raw);
            return result;
        }
        if (status != kNotFound)
            failed = true;  // TRYAGAIN, UNAVAIL, or a status no module may give
    }
    result.status = failed ? Status::unavailable : Status::not_found;
    return result;
}

void add_group(std::vector<uint32_t>& out, uint32_t gid, uint32_t primary_gid) {
    if (gid == primary_gid) return;
    for (uint32_t g : out)
        if (g == gid) return;
    out.push_back(gid);
}

// initgroups_dyn as glibc calls it: the array starts with the primary group (modules skip
// it), and the module reallocs it as it needs.
int call_initgroups(Library& lib, const std::string& user, uint32_t primary_gid,
                    std::vector<uint32_t>& out) {
    long start = 1;
    long size = 16;
    auto* groups = static_cast<gid_t*>(std::malloc(sizeof(gid_t) * static_cast<size_t>(size)));
    if (groups == nullptr) return kTryAgain;
    groups[0] = primary_gid;
    errno = 0;
    int status = lib.initgroups_dyn(user.c_str(), primary_gid, &start, &size, &groups, -1, &errno);
    for (long i = 1; i < start && groups != nullptr; ++i) add_group(out, groups[i], primary_gid);
    std::free(groups);
    return status;
}

// A module without initgroups_dyn: every group it enumerates that lists `user`, as glibc's
// compat_call (grp/compat-initgroups.c) does. SUCCESS when the user is in one of them.
int enumerate_groups(Library& lib, const std::string& user, uint32_t primary_gid,
                     std::vector<uint32_t>& out) {
    if (lib.getgrent_r == nullptr) return -1;  // UNAVAIL, as glibc says for a missing function
    MutexLock lock(lib.enumeration_mu);
    if (lib.setgrent != nullptr) {
        int status = lib.setgrent();
        if (status != kSuccess) return status;
    }
    bool any = false;
    int status = kSuccess;
    std::vector<char> buffer;
    for (size_t n = 0; n < kMaxEnumerated; ++n) {
        group raw{};
        status = call_growing(raw, buffer, [&](group* r, char* b, size_t len, int* e) {
            return lib.getgrent_r(r, b, len, e);
        });
        if (status != kSuccess) break;
        for (size_t i = 0; raw.gr_mem != nullptr && raw.gr_mem[i] != nullptr; ++i) {
            if (user == raw.gr_mem[i]) {
                add_group(out, raw.gr_gid, primary_gid);
                any = any || raw.gr_gid != primary_gid;
                break;
            }
        }
    }
    if (lib.endgrent != nullptr) lib.endgrent();
    if (status == kNotFound) status = kSuccess;  // the end of the enumeration
    if (status != kSuccess) return status;
    return any ? kSuccess : kNotFound;
}

}  // namespace

struct ModuleChain::Module {
    Library* library;
};

ModuleChain::ModuleChain(std::vector<std::string> services)
    : ModuleChain(std::move(services), std::string()) {}

ModuleChain::ModuleChain(std::vector<std::string> services, std::string module_folder)
    : ModuleChain(std::move(services), std::move(module_folder), system_clock()) {}

ModuleChain::ModuleChain(std::vector<std::string> services, std::string module_folder,
                         const Clock& clock)
    : clock_(clock), services_(std::move(services)) {
    for (const std::string& s : services_) {
        Library& lib = library_for(module_folder, s);
        // The dlopen itself waits for the first lookup, on a pool thread: a chain is built
        // on the front's thread.
        if (!lib.ready.load(std::memory_order_acquire)) lib.retry_due.store(true);
        modules_.push_back(std::make_unique<Module>(Module{&lib}));
    }
}

uint64_t ModuleChain::now_ms() const {
    return milliseconds(clock_.now());
}

ModuleChain::~ModuleChain() = default;

PasswdResult ModuleChain::passwd_by_name(const std::string& name) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    return first_found<PasswdEntry, passwd>(
        libs, now_ms(), [](Library& l) { return l.getpwnam; },
        [&](GetPwNam fn, passwd* r, char* b, size_t n, int* e) {
            return fn(name.c_str(), r, b, n, e);
        });
}

PasswdResult ModuleChain::passwd_by_uid(uint32_t uid) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    return first_found<PasswdEntry, passwd>(
        libs, now_ms(), [](Library& l) { return l.getpwuid; },
        [&](GetPwUid fn, passwd* r, char* b, size_t n, int* e) { return fn(uid, r, b, n, e); });
}

GroupResult ModuleChain::group_by_name(const std::string& name) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    return first_found<GroupEntry, group>(
        libs, now_ms(), [](Library& l) { return l.getgrnam; },
        [&](GetGrNam fn, group* r, char* b, size_t n, int* e) {
            return fn(name.c_str(), r, b, n, e);
        });
}

GroupResult ModuleChain::group_by_gid(uint32_t gid) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    return first_found<GroupEntry, group>(
        libs, now_ms(), [](Library& l) { return l.getgrgid; },
        [&](GetGrGid fn, group* r, char* b, size_t n, int* e) { return fn(gid, r, b, n, e); });
}

ServiceResult ModuleChain::service_by_name(const std::string& name, const std::string& proto) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    const char* p = proto.empty() ? nullptr : proto.c_str();
    return first_found<ServiceEntry, servent>(
        libs, now_ms(), [](Library& l) { return l.getservbyname; },
        [&](GetServByName fn, servent* r, char* b, size_t n, int* e) {
            return fn(name.c_str(), p, r, b, n, e);
        });
}

ServiceResult ModuleChain::service_by_port(int32_t port, const std::string& proto) {
    std::vector<Library*> libs;
    for (auto& m : modules_) libs.push_back(m->library);
    const char* p = proto.empty() ? nullptr : proto.c_str();
    return first_found<ServiceEntry, servent>(
        libs, now_ms(), [](Library& l) { return l.getservbyport; },
        [&](GetServByPort fn, servent* r, char* b, size_t n, int* e) {
            return fn(port, p, r, b, n, e);
        });
}

GroupListResult ModuleChain::groups_of(const std::string& user, uint32_t primary_gid) {
    return groups_of(user, primary_gid, true);
}

GroupListResult ModuleChain::groups_of(const std::string& user, uint32_t primary_gid,
                                       bool merge_all) {
    GroupListResult result;
    bool failed = false;
    bool any_success = false;
    const uint64_t now = now_ms();
    for (auto& m : modules_) {
        Library& lib = *m->library;
        if (!lib.installed(now)) continue;
        int status = lib.initgroups_dyn != nullptr
                         ? call_initgroups(lib, user, primary_gid, result.entry)
                         : enumerate_groups(lib, user, primary_gid, result.entry);
        if (status == kSuccess) {
            any_success = true;
            if (!merge_all) break;
        } else if (status != kNotFound) {
            failed = true;
        }
    }
    result.status = any_success ? Status::found : failed ? Status::unavailable : Status::not_found;
    result.incomplete = failed;
    return result;
}

}  // namespace nscache::nsdb
