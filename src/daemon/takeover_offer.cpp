// SPDX-License-Identifier: BSD-3-Clause
// The running instance's offer to `nscache serve --takeover` (built on the control thread),
// and the new instance's cache load from it: Daemon members kept out of daemon.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "cache/cache_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "daemon/daemon.h"

namespace nscache::daemon {
namespace {

// The cache in the cache file's format, in a memfd: in memory only, never in a folder
// another user could reach, and sealed against writes so the receiver reads exactly what was
// dumped.
Result<int> dump_cache_to_memfd(const cache::Cache& cache) {
    const int fd = memfd_create("nscache-takeover-cache", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0) return Error{std::string("cannot create a memfd: ") + std::strerror(errno)};
    const uint64_t started = monotonic_ms();
    const Result<uint64_t> dumped = cache::dump_cache_fd(cache, fd, started, wall_ms());
    if (!dumped) {
        close(fd);
        return Error{"cannot dump the cache: " + dumped.error()};
    }
    log_info("takeover: %llu entries dumped for the new instance in %llu ms",
             static_cast<unsigned long long>(*dumped),
             static_cast<unsigned long long>(monotonic_ms() - started));
    fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
    return fd;
}

}  // namespace

Result<std::vector<control::NamedFd>> Daemon::takeover_offer() {
    std::optional<std::vector<control::NamedFd>> duplicated = duplicate_for_offer();
    if (!duplicated) return Error{control::kStoppingRefusal};
    std::vector<control::NamedFd> offer = std::move(*duplicated);
    // The dump takes every shard's mutex in turn and writes the memfd: never under offer_mu_
    // (the lock rule). The cache outlives the control thread, which the drain joins.
    Result<int> cache_fd = dump_cache_to_memfd(*cache_);
    if (!cache_fd) {
        control::close_all(offer);
        return Error{cache_fd.error()};
    }
    offer.push_back({"cache", *cache_fd});
    // A drain that began during the dump unlinks this instance's paths at its exit: the new
    // one is refused, and waits for this one to exit to start as a first instance.
    MutexLock lock(offer_mu_);
    if (stopping_) {
        control::close_all(offer);
        return Error{control::kStoppingRefusal};
    }
    return offer;
}

std::optional<std::vector<control::NamedFd>> Daemon::duplicate_for_offer() {
    MutexLock lock(offer_mu_);
    if (stopping_) return std::nullopt;
    offer_made_ = true;  // the sockets are duplicated below, whatever becomes of the offer
    std::vector<control::NamedFd> offer;
    auto add = [&offer](const char* name, int fd) {
        if (fd >= 0) offer.push_back({name, fd});
    };
    auto dup_of = [](int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 0); };
    // Each socket once: shared ones (given to this process) are one socket dup'ed per
    // worker, beside per-worker SO_REUSEPORT ones. A socket's inode names it. None may be
    // left out: what the kernel queues on it would be lost when this process exits.
    std::set<ino_t> offered;
    for (const bool udp : {true, false}) {
        for (const auto& per_worker : udp ? sockets_.udp : sockets_.tcp) {
            for (int fd : per_worker) {
                struct stat st {};
                if (fstat(fd, &st) == 0 && offered.insert(st.st_ino).second) {
                    add(udp ? "dns-udp" : "dns-tcp", dup_of(fd));
                }
            }
        }
    }
    add("control", control_server_->dup_control_fd());
    add("metrics", control_server_->dup_metrics_fd());
    add("health", control_server_->dup_health_fd());
    if (nss_) add("nss", nss_->request_socket().dup_fd());
    if (nscd_) add("nscd", nscd_->request_socket().dup_fd());
    for (const auto& [path, fd] : runtime_lock_.held()) {
        const int copy = dup_of(fd);
        if (copy >= 0) offer.push_back({"lock:" + path, copy});
    }
    return offer;
}

void Daemon::release_paths_for_takeover() {
    // Before the offer goes out: from then on the new instance may serve the same sockets at
    // the same paths, even if this one never hears "ready" (it stops first, or gives up
    // waiting), so no exit of this one may unlink them. If the new one never serves, the files
    // outlive this instance, and the next start replaces them (a socket nobody listens on is
    // stale).
    control_server_->release_path();
    if (nss_) nss_->request_socket().release_path();
    if (nscd_) nscd_->request_socket().release_path();
}

void Daemon::drain_for_takeover() {
    // Probes and commands go to the instance that serves on: this one's /ready would say 503
    // while it drains, and a `reload` or `flush` here would change what is about to exit.
    control_server_->stop_listening();
    supervisor_->request_stop();
}

bool Daemon::load_handed_cache(const cache::LoadOptions& options) {
    if (!handover_) return false;
    const int fd = handover_->take("cache");
    if (fd < 0) return false;
    // The dump is smaller than the cache's accounted bytes; 4x (and a floor for small
    // caches) leaves room for a running instance configured larger than this one.
    const uint64_t max_bytes = std::max<uint64_t>(4 * uint64_t{config_.cache_size}, 64u << 20);
    if (auto usable = Handover::check_cache_memfd(fd, max_bytes); !usable) {
        close(fd);
        log_warning("takeover: the running instance's cache was not loaded: %s",
                    usable.error().c_str());
        return false;
    }
    const uint64_t started = monotonic_ms();
    // No worker runs yet: the cache is the loader's alone (one pass over the memfd).
    const Result<uint64_t> loaded =
        cache::load_cache_fd(*cache_, fd, settings_->resolver.ttl, started, wall_ms(), options);
    close(fd);
    if (!loaded) {
        log_warning("takeover: the running instance's cache was not loaded: %s",
                    loaded.error().c_str());
        return false;
    }
    log_info("loaded %llu entries from the running instance in %llu ms",
             static_cast<unsigned long long>(*loaded),
             static_cast<unsigned long long>(monotonic_ms() - started));
    return true;
}

}  // namespace nscache::daemon
