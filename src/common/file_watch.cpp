// SPDX-License-Identifier: BSD-3-Clause
#include "common/file_watch.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <algorithm>

#include "common/files.h"

namespace nscache {
namespace {

// Events of one change (a write then a rename, several files at once) come within this.
constexpr uint64_t kSettleMs = 100;
constexpr uint64_t kPollMs = 5'000;
constexpr uint32_t kFolderEvents =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_CREATE | IN_DELETE | IN_ATTRIB;

bool same(const struct stat& a, const struct stat& b) {
    return a.st_dev == b.st_dev && a.st_ino == b.st_ino && a.st_size == b.st_size &&
           a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

FileWatch::FileWatch(EventLoop& loop, std::function<void()> on_change)
    : loop_(loop), on_change_(std::move(on_change)) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0) loop_.add(fd_, EPOLLIN, this, registration_);
    poll();
}

FileWatch::~FileWatch() {
    loop_.cancel_timer(settle_timer_);
    loop_.cancel_timer(poll_timer_);
    if (fd_ >= 0) {
        loop_.remove(registration_);
        close(fd_);  // drops the watches with it
    }
}

void FileWatch::watch(const std::vector<std::string>& paths) {
    paths_.clear();
    for (const auto& p : paths) {
        if (!p.empty()) paths_.push_back(p);
    }
    rearm();
}

// Watches the folder of each path and of what it resolves to (a symlink's target may live
// elsewhere), and remembers what each path resolves to now, for the poll. Folders already
// watched are kept: removing a watch queues an event of its own (IN_IGNORED).
void FileWatch::rearm() {
    seen_.clear();
    std::vector<Folder> wanted;
    auto want = [&wanted](const std::string& file) {
        const std::string folder = parent_folder(file);
        const size_t slash = file.rfind('/');
        const std::string name = slash == std::string::npos ? file : file.substr(slash + 1);
        auto it = std::find_if(wanted.begin(), wanted.end(),
                               [&](const Folder& f) { return f.path == folder; });
        if (it == wanted.end()) it = wanted.insert(wanted.end(), Folder{-1, folder, {}});
        it->names.push_back(name);
    };
    for (const std::string& path : paths_) {
        want(path);
        char resolved[PATH_MAX];
        if (realpath(path.c_str(), resolved) != nullptr && path != resolved) want(resolved);
        Seen s;
        s.path = path;
        s.exists = stat(path.c_str(), &s.st) == 0;
        seen_.push_back(s);
    }
    if (fd_ < 0) return;
    for (Folder& f : wanted) {
        auto old = std::find_if(folders_.begin(), folders_.end(),
                                [&](const Folder& o) { return o.path == f.path; });
        if (old != folders_.end()) {
            f.wd = old->wd;
            old->wd = -1;  // kept
        } else {
            f.wd = inotify_add_watch(fd_, f.path.c_str(), kFolderEvents | IN_ONLYDIR);
        }
    }
    for (const Folder& old : folders_) {
        if (old.wd >= 0) inotify_rm_watch(fd_, old.wd);
    }
    folders_ = std::move(wanted);
}

void FileWatch::on_event(uint32_t) {
    alignas(inotify_event) char buffer[8192];
    bool relevant = false;
    for (;;) {
        const ssize_t n = read(fd_, buffer, sizeof buffer);
        if (n <= 0) break;
        for (ssize_t at = 0; at < n;) {
            const auto* ev = reinterpret_cast<const inotify_event*>(buffer + at);
            at += static_cast<ssize_t>(sizeof(inotify_event) + ev->len);
            if (ev->mask & IN_IGNORED) continue;  // a watch we removed
            const std::string name = ev->len > 0 ? std::string(ev->name) : std::string();
            for (const Folder& f : folders_) {
                if (f.wd != ev->wd) continue;
                // Another file of the folder (the rest of /etc) is none of our business.
                if (name.empty() ||
                    std::find(f.names.begin(), f.names.end(), name) != f.names.end()) {
                    relevant = true;
                }
            }
        }
    }
    if (relevant) changed_soon();
}

void FileWatch::changed_soon() {
    if (settle_timer_ != EventLoop::kNoTimer) return;
    settle_timer_ = loop_.add_timer(loop_.now_ms() + kSettleMs, [this] {
        settle_timer_ = EventLoop::kNoTimer;
        rearm();  // a swapped symlink may point into another folder now
        on_change_();
    });
}

void FileWatch::poll() {
    bool changed = false;
    for (Seen& s : seen_) {
        struct stat now {};
        const bool exists = stat(s.path.c_str(), &now) == 0;
        if (exists != s.exists || (exists && !same(now, s.st))) changed = true;
    }
    if (changed) changed_soon();
    poll_timer_ = loop_.add_timer(loop_.now_ms() + kPollMs, [this] {
        poll_timer_ = EventLoop::kNoTimer;
        poll();
    });
}

}  // namespace nscache
