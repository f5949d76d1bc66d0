// SPDX-License-Identifier: BSD-3-Clause
/* Talks to the daemon over its unix socket: non-blocking connect, the peer's credentials
 * checked, one request, one response, poll() against a deadline, the response's framing
 * checked before the payload is trusted. */
#include "socket_client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "nss_clock.h"

static const char* socket_path(void) {
    const char* env = secure_getenv("NSCACHE_NSS_SOCKET");
    return env != NULL && env[0] != '\0' ? env : NSCACHE_NSS_SOCKET;
}

static int remaining_ms(int64_t deadline_ms) {
    const int64_t left = deadline_ms - nss_now_ms();
    return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* Waits until fd is ready for events; false on timeout or error. */
static bool wait_ready(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        const int left = remaining_ms(deadline_ms);
        if (left == 0) return false;
        struct pollfd p = {.fd = fd, .events = events, .revents = 0};
        const int n = poll(&p, 1, left);
        if (n > 0) return true; /* errors and hang-ups surface in the next read or write */
        if (n < 0 && errno != EINTR) return false;
    }
}

/* The daemon listens as root (it drops privileges later; SO_PEERCRED reports who listened),
 * or as this process's own user (an unprivileged daemon serving itself). Anyone else could
 * have put a socket at the path (NSCACHE_NSS_SOCKET, or a folder another user controls) to
 * feed this process answers and a map of its choosing. */
static bool peer_trusted(int fd) {
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || len != sizeof cred)
        return false;
    return cred.uid == 0 || cred.uid == geteuid();
}

/* Connects fd to path. A full backlog (EAGAIN) is retried briefly until the deadline; any
 * other failure, or a listener we do not trust, means there is no daemon to ask. */
static enum nss_ask_result connect_daemon(int fd, const char* path, int64_t deadline_ms) {
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    const size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) return NSS_ASK_DOWN;
    memcpy(sa.sun_path, path, n);
    for (;;) {
        if (connect(fd, (const struct sockaddr*)&sa, sizeof sa) == 0) {
            if (peer_trusted(fd)) return NSS_ASK_OK;
            errno = EACCES;
            return NSS_ASK_DOWN;
        }
        if (errno == EINTR) continue;
        if (errno != EAGAIN) return NSS_ASK_DOWN;
        if (remaining_ms(deadline_ms) == 0) return NSS_ASK_FAILED;
        const struct timespec pause = {.tv_sec = 0, .tv_nsec = 2 * 1000 * 1000};
        nanosleep(&pause, NULL);
    }
}

static bool send_all(int fd, const uint8_t* p, size_t n, int64_t deadline_ms) {
    while (n > 0) {
        const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w > 0) {
            p += w;
            n -= (size_t)w;
        } else if (w < 0 && errno == EINTR) {
            continue;
        } else if (w < 0 && errno == EAGAIN) {
            if (!wait_ready(fd, POLLOUT, deadline_ms)) return false;
        } else {
            return false;
        }
    }
    return true;
}

/* Keeps the first descriptor that came with a message (if keep is not NULL and holds -1) and
 * closes any other: a process must not collect descriptors it did not ask for. */
static void take_descriptors(struct msghdr* msg, int* keep) {
    for (struct cmsghdr* c = CMSG_FIRSTHDR(msg); c != NULL; c = CMSG_NXTHDR(msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < n; ++i) {
            int fd;
            memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            if (keep != NULL && *keep < 0) {
                *keep = fd;
            } else {
                close(fd);
            }
        }
    }
}

/* Reads exactly n bytes; a descriptor passed along goes to *passed_fd (see take_descriptors).
 */
static bool recv_all(int fd, uint8_t* p, size_t n, int64_t deadline_ms, int* passed_fd) {
    while (n > 0) {
        struct iovec iov = {.iov_base = p, .iov_len = n};
        union {
            struct cmsghdr align;
            char bytes[CMSG_SPACE(4 * sizeof(int))];
        } control;
        struct msghdr msg;
        memset(&msg, 0, sizeof msg);
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.bytes;
        msg.msg_controllen = sizeof control.bytes;
        const ssize_t r = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
        if (r >= 0) take_descriptors(&msg, passed_fd);
        if (r > 0) {
            p += r;
            n -= (size_t)r;
        } else if (r < 0 && errno == EINTR) {
            continue;
        } else if (r < 0 && errno == EAGAIN) {
            if (!wait_ready(fd, POLLIN, deadline_ms)) return false;
        } else {
            return false; /* closed early or failed */
        }
    }
    return true;
}

/* Sends one request and reads the response's header, checked against what was asked. */
static enum nss_ask_result exchange(int fd, int op, int family, const void* data, size_t len,
                                    int64_t deadline_ms, struct nscache_nss_response* resp,
                                    int* passed_fd) {
    uint8_t request[sizeof(struct nscache_nss_request) + NSCACHE_NSS_MAX_DATA];
    const struct nscache_nss_request head = {
        .magic = NSCACHE_NSS_REQUEST_MAGIC,
        .version = NSCACHE_NSS_VERSION,
        .op = (uint16_t)op,
        .family = family,
        .data_len = (uint32_t)len,
    };
    memcpy(request, &head, sizeof head);
    if (len > 0) memcpy(request + sizeof head, data, len);
    if (!send_all(fd, request, sizeof head + len, deadline_ms)) return NSS_ASK_FAILED;
    if (!recv_all(fd, (uint8_t*)resp, sizeof *resp, deadline_ms, passed_fd)) return NSS_ASK_FAILED;
    if (resp->magic != NSCACHE_NSS_RESPONSE_MAGIC || resp->version != NSCACHE_NSS_VERSION ||
        resp->family != family || resp->status > NSCACHE_NSS_UNAVAIL ||
        resp->payload_len > NSCACHE_NSS_MAX_PAYLOAD)
        return NSS_ASK_FAILED;
    return NSS_ASK_OK;
}

/* A connected socket to a daemon we trust, or -1 with *result saying why not. */
static int open_daemon(int64_t deadline_ms, enum nss_ask_result* result) {
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        *result = NSS_ASK_DOWN;
        return -1;
    }
    *result = connect_daemon(fd, socket_path(), deadline_ms);
    if (*result == NSS_ASK_OK) return fd;
    const int saved = errno;
    close(fd);
    errno = saved;
    return -1;
}

static void close_keeping_errno(int fd) {
    const int saved = errno;
    close(fd);
    errno = saved;
}

enum nss_ask_result nss_socket_ask(int op, int family, const void* data, size_t len,
                                   int64_t deadline_ms, struct nss_reply* reply, uint32_t* map_id) {
    if (len > NSCACHE_NSS_MAX_DATA) return NSS_ASK_FAILED;
    enum nss_ask_result r;
    const int fd = open_daemon(deadline_ms, &r);
    if (fd < 0) return r;
    struct nscache_nss_response resp;
    r = exchange(fd, op, family, data, len, deadline_ms, &resp, NULL);
    if (r == NSS_ASK_OK) {
        uint8_t* room = nss_reply_room(reply, resp.payload_len);
        if (room == NULL || !recv_all(fd, room, resp.payload_len, deadline_ms, NULL)) {
            r = NSS_ASK_FAILED;
        } else {
            reply->status = resp.status;
            reply->ttl = resp.ttl;
            reply->payload = room;
            reply->payload_len = resp.payload_len;
            *map_id = resp.map_id;
        }
    }
    close_keeping_errno(fd);
    return r;
}

enum nss_ask_result nss_socket_get_map(int64_t deadline_ms, int* map_fd, uint64_t* size,
                                       uint32_t* map_id) {
    *map_fd = -1;
    enum nss_ask_result r;
    const int fd = open_daemon(deadline_ms, &r);
    if (fd < 0) return r;
    struct nscache_nss_response resp;
    int passed = -1;
    r = exchange(fd, NSCACHE_NSS_GET_MAP, 0, NULL, 0, deadline_ms, &resp, &passed);
    uint64_t advertised = 0;
    if (r == NSS_ASK_OK &&
        (resp.status != NSCACHE_NSS_FOUND || resp.payload_len != sizeof advertised ||
         !recv_all(fd, (uint8_t*)&advertised, sizeof advertised, deadline_ms, &passed) ||
         passed < 0))
        r = NSS_ASK_FAILED;
    if (r == NSS_ASK_OK) {
        *map_fd = passed;
        *size = advertised;
        *map_id = resp.map_id;
    } else if (passed >= 0) {
        close_keeping_errno(passed);
    }
    close_keeping_errno(fd);
    return r;
}
