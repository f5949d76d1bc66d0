// SPDX-License-Identifier: BSD-3-Clause
#include "common/runtime_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/files.h"

namespace nscache {
namespace {

std::string holder_pid(int fd) {
    char buf[32] = {};
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    std::string pid(buf, n > 0 ? static_cast<size_t>(n) : 0);
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return pid.empty() ? "unknown" : pid;
}

void write_pid(int fd) {
    const std::string pid = std::to_string(getpid()) + "\n";
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The lock holds without the pid; only the message of a second instance suffers.
    }
}

// `fd` is the regular file at `path` (never through a link).
bool is_file_at(int fd, const std::string& path) {
    struct stat at {};
    struct stat held {};
    return lstat(path.c_str(), &at) == 0 && fstat(fd, &held) == 0 && S_ISREG(at.st_mode) &&
           at.st_dev == held.st_dev && at.st_ino == held.st_ino;
}

}  // namespace

RuntimeLock::~RuntimeLock() {
    release();
}

void RuntimeLock::release() {
    for (const auto& [path, fd] : fds_) close(fd);
    fds_.clear();
}

void RuntimeLock::claim_pid() {
    for (const auto& [path, fd] : fds_) write_pid(fd);
}

Result<void> RuntimeLock::acquire(const std::vector<std::string>& paths,
                                  std::map<std::string, int>* inherited) {
    for (const std::string& path : paths) {
        if (path.empty()) continue;
        const std::string lock_path = path + ".lock";
        if (inherited != nullptr) {
            auto it = inherited->find(lock_path);
            if (it != inherited->end() && is_file_at(it->second, lock_path) &&
                flock(it->second, LOCK_EX | LOCK_NB) == 0) {
                // The pid stays the running instance's until it drains (claim_pid()).
                fds_.emplace_back(lock_path, it->second);
                inherited->erase(it);
                continue;
            }
        }
        if (!make_parent_folder(lock_path)) {
            release();
            return Error{"cannot create the folder of " + lock_path + ": " + std::strerror(errno)};
        }
        // Never through a link someone planted, never a FIFO that would block us.
        const int fd =
            open(lock_path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0644);
        struct stat st {};
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            const std::string error = fd < 0 ? std::strerror(errno) : "not a regular file";
            if (fd >= 0) close(fd);
            release();
            return Error{"cannot open lock file " + lock_path + ": " + error};
        }
        if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
            const std::string message = "another nscache (pid " + holder_pid(fd) + ") uses " +
                                        path + "; stop it or give this one other paths";
            close(fd);
            release();
            return Error{message};
        }
        write_pid(fd);
        fds_.emplace_back(lock_path, fd);
    }
    return {};
}

}  // namespace nscache
