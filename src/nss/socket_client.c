/* Talks to the daemon over its unix socket: non-blocking connect, one request, one response,
 * poll() against a deadline, the response's framing checked before the payload is trusted. */
#include "socket_client.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
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

/* Connects fd to path. A full backlog (EAGAIN) is retried briefly until the deadline; any
 * other failure means there is no daemon to ask. */
static enum nss_ask_result connect_daemon(int fd, const char* path, int64_t deadline_ms) {
    struct sockaddr_un sa;
    memset(&sa, 0, sizeof sa);
    sa.sun_family = AF_UNIX;
    const size_t n = strlen(path);
    if (n >= sizeof sa.sun_path) return NSS_ASK_DOWN;
    memcpy(sa.sun_path, path, n);
    for (;;) {
        if (connect(fd, (const struct sockaddr*)&sa, sizeof sa) == 0) return NSS_ASK_OK;
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

static bool recv_all(int fd, uint8_t* p, size_t n, int64_t deadline_ms) {
    while (n > 0) {
        const ssize_t r = recv(fd, p, n, 0);
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

static enum nss_ask_result exchange(int fd, int op, int family, const void* data, size_t len,
                                    int64_t deadline_ms, struct nss_reply* reply) {
    uint8_t request[sizeof(struct nscache_nss_request) + NSCACHE_NSS_MAX_DATA];
    const struct nscache_nss_request head = {
        .magic = NSCACHE_NSS_REQUEST_MAGIC,
        .version = NSCACHE_NSS_VERSION,
        .op = (uint16_t)op,
        .family = family,
        .data_len = (uint32_t)len,
    };
    memcpy(request, &head, sizeof head);
    memcpy(request + sizeof head, data, len);
    if (!send_all(fd, request, sizeof head + len, deadline_ms)) return NSS_ASK_FAILED;

    struct nscache_nss_response resp;
    if (!recv_all(fd, (uint8_t*)&resp, sizeof resp, deadline_ms)) return NSS_ASK_FAILED;
    if (resp.magic != NSCACHE_NSS_RESPONSE_MAGIC || resp.version != NSCACHE_NSS_VERSION ||
        resp.family != family || resp.status > NSCACHE_NSS_UNAVAIL ||
        resp.payload_len > NSCACHE_NSS_MAX_PAYLOAD)
        return NSS_ASK_FAILED;
    uint8_t* room = nss_reply_room(reply, resp.payload_len);
    if (room == NULL) return NSS_ASK_FAILED;
    if (!recv_all(fd, room, resp.payload_len, deadline_ms)) return NSS_ASK_FAILED;
    reply->status = resp.status;
    reply->ttl = resp.ttl;
    reply->payload = room;
    reply->payload_len = resp.payload_len;
    return NSS_ASK_OK;
}

enum nss_ask_result nss_socket_ask(int op, int family, const void* data, size_t len,
                                   int64_t deadline_ms, struct nss_reply* reply) {
    if (len > NSCACHE_NSS_MAX_DATA) return NSS_ASK_FAILED;
    const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return NSS_ASK_DOWN;
    enum nss_ask_result r = connect_daemon(fd, socket_path(), deadline_ms);
    if (r == NSS_ASK_OK) r = exchange(fd, op, family, data, len, deadline_ms, reply);
    const int saved = errno;
    close(fd);
    errno = saved;
    return r;
}
