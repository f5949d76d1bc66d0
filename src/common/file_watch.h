// SPDX-License-Identifier: BSD-3-Clause
// Tells when files named by path may have changed, the way administrators and network
// managers change them: written in place, replaced by rename (resolv.conf usually is), or a
// symlink swapped to point elsewhere (into /run, often). inotify watches each file's folder
// and, for a symlink, its target's folder; events are gathered for a short moment and then
// `on_change` runs once. The callback re-reads and compares: a spurious call costs a read.
// A slow stat() poll backs inotify up (a folder that did not exist yet, a deeper link).
// Lives on one EventLoop; that loop's thread only.
#pragma once

#include <sys/stat.h>

#include <functional>
#include <string>
#include <vector>

#include "common/event_loop.h"

namespace nscache {

class FileWatch final : public EventHandler {
  public:
    FileWatch(EventLoop& loop, std::function<void()> on_change);
    ~FileWatch();
    FileWatch(const FileWatch&) = delete;
    FileWatch& operator=(const FileWatch&) = delete;

    // The files to watch (replaces any earlier set). Empty paths are skipped.
    void watch(const std::vector<std::string>& paths);
    void on_event(uint32_t events) override;

  private:
    struct Seen {
        std::string path;
        struct stat st {};
        bool exists = false;
    };
    struct Folder {
        int wd = -1;
        std::string path;
        std::vector<std::string> names;  // the watched files' names in it
    };
    void rearm();
    void changed_soon();
    void poll();

    EventLoop& loop_;
    std::function<void()> on_change_;
    int fd_ = -1;
    EventLoop::Registration registration_ = EventLoop::kNoRegistration;
    std::vector<std::string> paths_;
    std::vector<Folder> folders_;
    std::vector<Seen> seen_;
    EventLoop::TimerHandle settle_timer_ = EventLoop::kNoTimer;
    EventLoop::TimerHandle poll_timer_ = EventLoop::kNoTimer;
};

}  // namespace nscache
