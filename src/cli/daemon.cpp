// SPDX-License-Identifier: BSD-3-Clause
#include "cli/daemon.h"

#include <cstdio>
#include <cstdlib>

#include "common/log.h"
#include "daemon/daemon.h"
#include "nscd/other_databases.h"

namespace nscache {
namespace {

int failed(const Result<void>& step, int exit_code) {
    log_error("%s", step.error().c_str());
    return exit_code;
}

int run_steps(const ConfigSource& source, const Config& config, bool takeover) {
    daemon::block_daemon_signals();
    daemon::Daemon d(source, config);
    if (auto r = d.take_inherited_sockets(); !r) return failed(r, 2);
    if (takeover) {
        if (auto r = d.take_over(); !r) return failed(r, 1);
    }
    if (auto r = d.acquire_lock(); !r) return failed(r, 1);
    if (auto r = d.build_state(); !r) return failed(r, 2);
    d.build_settings();
    if (auto r = d.open_sockets(); !r) return failed(r, 1);
    if (auto r = d.find_user(); !r) return failed(r, 1);
    if (auto r = d.open_fronts(); !r) return failed(r, 1);
    if (auto r = d.open_control(); !r) return failed(r, 1);
    d.load_cache_file();
    if (auto r = d.drop_privileges(); !r) return failed(r, 1);
    d.start_threads();
    d.announce_ready();
    d.finish_takeover();
    d.run();
    d.stop_threads();
    d.save_cache_file();
    return 0;
}

}  // namespace

int run_daemon(const ConfigSource& source, const Config& config, bool takeover) {
    const int code = run_steps(source, config, takeover);
    // A lookup left inside an NSS module at shutdown (an LDAP server away) still runs on its
    // thread: exit() would run the modules' destructors and atexit handlers (libldap's,
    // OpenSSL's) under it, and the daemon would crash on its way out. Everything is saved and
    // closed by now, so nothing is lost by skipping them.
    if (nscd::OtherDatabases::threads_left_behind() > 0) {
        std::fflush(nullptr);
        std::_Exit(code);
    }
    return code;
}

}  // namespace nscache
