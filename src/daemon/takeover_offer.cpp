// SPDX-License-Identifier: BSD-3-Clause
// The running instance's offer to `nscache serve --takeover` (built on the control thread),
// and the new instance's cache load from it: Daemon members kept out of daemon.cpp.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "cache/cache_file.h"
#include "common/clock.h"
#include "common/log.h"
#include "daemon/daemon.h"

namespace nscache::daemon {
namespace {

// The cache in the cache file's format, in a descriptor of its own. Through a private
// temporary folder until cache_file.h gives an fd-based dump (branch i20-cacheload:
// dump_cache_fd into a memfd); the file is unlinked at once, only the descriptor remains.
Result<int> dump_cache_to_descriptor(const cache::Cache& cache) {
    char folder[] = "/tmp/nscache-takeover.XXXXXX";
    if (mkdtemp(folder) == nullptr) {
        return Error{std::string("cannot create a folder for the cache: ") + std::strerror(errno)};
    }
    const std::string path = std::string(folder) + "/cache";
    const Result<uint64_t> dumped = cache::dump_cache(cache, path, monotonic_ms(), wall_ms());
    const int fd = dumped ? open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
    unlink(path.c_str());
    rmdir(folder);
    if (!dumped) return Error{"cannot dump the cache: " + dumped.error()};
    if (fd < 0) return Error{std::string("cannot reopen the cache dump: ") + std::strerror(errno)};
    return fd;
}

// load_cache_bytes over the descriptor's whole content (another process's: every check of a
// cache file applies).
Result<uint64_t> load_cache_from_descriptor(cache::Cache& cache, int fd,
                                            const cache::TtlPolicy& policy) {
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return Error{"not a regular file"};
    if (st.st_size == 0) return Error{"empty"};
    void* map = mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) return Error{std::string("cannot map it: ") + std::strerror(errno)};
    Result<uint64_t> loaded =
        cache::load_cache_bytes(cache, static_cast<const uint8_t*>(map),
                                static_cast<size_t>(st.st_size), policy, monotonic_ms(), wall_ms());
    munmap(map, static_cast<size_t>(st.st_size));
    return loaded;
}

}  // namespace

Result<std::vector<control::NamedFd>> Daemon::takeover_offer() {
    std::vector<control::NamedFd> offer;
    auto add = [&offer](const char* name, int fd) {
        if (fd >= 0) offer.push_back({name, fd});
    };
    auto dup_of = [](int fd) { return fcntl(fd, F_DUPFD_CLOEXEC, 0); };
    // Shared sockets (given to this process) are one socket per address, dup'ed per worker:
    // worker 0's are all of them.
    const size_t workers =
        sockets_.shared ? std::min<size_t>(1, sockets_.udp.size()) : sockets_.udp.size();
    for (size_t w = 0; w < workers; ++w) {
        for (int fd : sockets_.udp[w]) add("dns-udp", dup_of(fd));
        for (int fd : sockets_.tcp[w]) add("dns-tcp", dup_of(fd));
    }
    add("control", control_server_->dup_control_fd());
    add("metrics", control_server_->dup_metrics_fd());
    if (nss_) add("nss", nss_->request_socket().dup_fd());
    if (nscd_) add("nscd", nscd_->request_socket().dup_fd());
    for (const auto& [path, fd] : runtime_lock_.held()) {
        const int copy = dup_of(fd);
        if (copy >= 0) offer.push_back({"lock:" + path, copy});
    }
    Result<int> cache_fd = dump_cache_to_descriptor(*cache_);
    if (!cache_fd) {
        control::close_all(offer);
        return Error{cache_fd.error()};
    }
    add("cache", *cache_fd);
    return offer;
}

void Daemon::drain_for_takeover() {
    // The new instance serves the same sockets at the same paths: leave them there.
    control_server_->release_path();
    if (nss_) nss_->request_socket().release_path();
    if (nscd_) nscd_->request_socket().release_path();
    supervisor_->request_stop();
}

bool Daemon::load_handed_cache() {
    if (!handover_) return false;
    const int fd = handover_->take("cache");
    if (fd < 0) return false;
    const Result<uint64_t> loaded =
        load_cache_from_descriptor(*cache_, fd, settings_->resolver.ttl);
    close(fd);
    if (!loaded) {
        log_warning("takeover: the running instance's cache was not loaded: %s",
                    loaded.error().c_str());
        return false;
    }
    log_info("loaded %llu entries from the running instance",
             static_cast<unsigned long long>(*loaded));
    return true;
}

}  // namespace nscache::daemon
