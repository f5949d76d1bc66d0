// SPDX-License-Identifier: BSD-3-Clause
// LD_PRELOAD shim for the load generator of bench/encrypted/run: sets TCP_NODELAY on every TCP
// socket the process connects. dnsperf 2.10 leaves Nagle on, and its DoH client writes a query's
// HEADERS and DATA frames separately: the DATA then waits for the server's delayed ACK (about
// 40 ms a query on loopback), so every server measured idles and q/s is the ACK timer's.
// Only the client changes; the servers run as shipped.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

typedef int (*connect_fn)(int, const struct sockaddr*, socklen_t);

int connect(int fd, const struct sockaddr* addr, socklen_t len) {
    static connect_fn real;
    if (!real) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
    int type = 0;
    socklen_t type_len = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &type_len) == 0 && type == SOCK_STREAM) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    }
    return real(fd, addr, len);
}
