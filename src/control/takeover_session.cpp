// SPDX-License-Identifier: BSD-3-Clause
#include "control/takeover_session.h"

#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "common/log.h"

namespace nscache::control {
namespace {

constexpr size_t kMaxLine = 64;

void send_line(int fd, const std::string& text) {
    // A few bytes on a socket that holds nothing else of ours: they go out whole or not at all.
    ssize_t ignored = send(fd, text.data(), text.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)ignored;
}

}  // namespace

TakeoverSession::TakeoverSession(EventLoop& loop, int fd, const ControlAccess& access,
                                 const TakeoverHooks& hooks, std::function<void()> done)
    : loop_(loop), fd_(fd), access_(access), hooks_(hooks), done_(std::move(done)) {}

TakeoverSession::~TakeoverSession() {
    if (!closed_) {
        loop_.cancel_timer(deadline_);
        loop_.forget(registration_);
        close(fd_);
    }
}

void TakeoverSession::start() {
    if (!peer_may_take_over(fd_, access_)) {
        refuse(
            "permission denied (only root, or the daemon's user when it never switched users, "
            "may take over)");
        return;
    }
    if (!hooks_.offer || !hooks_.drain) {
        refuse("takeover is not available");
        return;
    }
    Result<std::vector<NamedFd>> offer = hooks_.offer();
    if (!offer) {
        refuse(offer.error());
        return;
    }
    if (hooks_.handing_over) hooks_.handing_over();
    const Result<void> sent = send_takeover(fd_, *offer);
    const size_t count = offer->size();
    close_all(*offer);
    if (!sent) {
        log_warning("takeover: %s; serving on", sent.error().c_str());
        finish();
        return;
    }
    if (!loop_.add(fd_, EPOLLIN, this, registration_)) {
        abandon("cannot watch the connection");
        return;
    }
    deadline_ = loop_.add_timer(loop_.now_ms() + kReadyTimeoutMs, [this] {
        deadline_ = EventLoop::kNoTimer;
        abandon("the new instance was not ready in time");
    });
    log_info("takeover: handed %zu descriptors to a new instance, waiting for it to serve", count);
}

void TakeoverSession::on_event(uint32_t) {
    if (closed_) return;
    char buf[kMaxLine];
    for (;;) {
        const ssize_t n = recv(fd_, buf, sizeof buf, 0);
        if (n > 0) {
            in_.append(buf, static_cast<size_t>(n));
            if (in_.size() > kMaxLine) break;
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (in_.find('\n') == std::string::npos) return;
        }
        break;
    }
    const size_t newline = in_.find('\n');
    if (newline == std::string::npos) {
        abandon("the new instance went away before it served");
        return;
    }
    if (in_.substr(0, newline) != "ready") {
        abandon("the new instance did not say it was ready");
        return;
    }
    log_info("takeover: the new instance serves; draining");
    drained_ = true;
    hooks_.drain();
    send_line(fd_, "ok draining\n");
    finish();
}

void TakeoverSession::refuse(const std::string& why) {
    log_warning("takeover refused: %s", why.c_str());
    send_line(fd_, "error: " + why + "\n");
    finish();
}

void TakeoverSession::abandon(const char* why) {
    log_warning("takeover abandoned: %s; serving on", why);
    finish();
}

void TakeoverSession::finish() {
    if (closed_) return;
    closed_ = true;
    loop_.cancel_timer(deadline_);
    loop_.forget(registration_);
    close(fd_);
    if (done_) done_();
}

}  // namespace nscache::control
