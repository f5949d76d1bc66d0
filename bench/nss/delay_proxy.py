#!/usr/bin/python3
# SPDX-License-Identifier: BSD-3-Clause
"""A UDP proxy that adds a fixed delay each way: a "remote" DNS server on a slow link, for a
kernel without netem.

    delay_proxy.py --listen ADDR:PORT --upstream ADDR:PORT --delay-ms 5 [--max-clients 4096]

Every datagram from a client is forwarded to the upstream --delay-ms after it arrived, from a
socket of its own per client address and port (so the answer finds its way back), and every
answer goes back to that client --delay-ms after it arrived: a round trip through the proxy
costs 2 x --delay-ms plus the upstream's own time. Order is kept (one FIFO per direction,
every datagram gets the same delay). At most --max-clients client sockets are kept; the least
recently used one is closed past that. SIGTERM/SIGINT stop it; it prints its counters on exit.
UDP only (the benchmark's answers are small; nothing here sets TC).
"""

import argparse
import collections
import heapq
import itertools
import selectors
import signal
import socket
import sys
import time


def addr(s):
    host, _, port = s.rpartition(":")
    return host, int(port)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--listen", required=True, type=addr)
    ap.add_argument("--upstream", required=True, type=addr)
    ap.add_argument("--delay-ms", type=float, required=True)
    ap.add_argument("--max-clients", type=int, default=4096)
    a = ap.parse_args()
    if not 0 <= a.delay_ms <= 10_000:
        sys.exit("--delay-ms must be 0..10000")
    delay = a.delay_ms / 1000.0
    stop = [False]

    def on_signal(_s, _f):
        stop[0] = True
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    sel = selectors.DefaultSelector()
    lsock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    lsock.bind(a.listen)
    lsock.setblocking(False)
    sel.register(lsock, selectors.EVENT_READ, None)
    clients = collections.OrderedDict()  # client addr -> upstream socket
    owner = {}                           # upstream socket fd -> client addr
    pending = []                         # heap of (due, seq, sock, data, dest)
    seq = itertools.count()
    n = {"queries": 0, "answers": 0, "clients_closed": 0, "send_errors": 0}
    print(f"delay_proxy: {a.listen[0]}:{a.listen[1]} -> {a.upstream[0]}:{a.upstream[1]}, "
          f"{a.delay_ms} ms each way", flush=True)

    while not stop[0]:
        now = time.monotonic()
        while pending and pending[0][0] <= now:
            _, _, sock, data, dest = heapq.heappop(pending)
            try:
                if dest is None:
                    sock.send(data)
                else:
                    sock.sendto(data, dest)
            except OSError:
                n["send_errors"] += 1
        timeout = max(0.0, pending[0][0] - time.monotonic()) if pending else 0.5
        try:
            events = sel.select(min(timeout, 0.5))
        except InterruptedError:
            continue
        now = time.monotonic()
        for key, _ in events:
            sock = key.fileobj
            for _ in range(256):
                try:
                    data, src = sock.recvfrom(65535)
                except (BlockingIOError, InterruptedError):
                    break
                except OSError:  # e.g. ICMP port unreachable from the upstream
                    break
                if sock is lsock:
                    up = clients.get(src)
                    if up is None:
                        up = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                        up.setblocking(False)
                        up.connect(a.upstream)
                        sel.register(up, selectors.EVENT_READ, None)
                        clients[src] = up
                        owner[up.fileno()] = src
                        if len(clients) > a.max_clients:
                            old_src, old = clients.popitem(last=False)
                            owner.pop(old.fileno(), None)
                            sel.unregister(old)
                            old.close()
                            n["clients_closed"] += 1
                    else:
                        clients.move_to_end(src)
                    heapq.heappush(pending, (now + delay, next(seq), up, data, None))
                    n["queries"] += 1
                else:
                    dest = owner.get(sock.fileno())
                    if dest is not None:
                        heapq.heappush(pending, (now + delay, next(seq), lsock, data, dest))
                        n["answers"] += 1
    print("delay_proxy: " + " ".join(f"{k}={v}" for k, v in n.items()), flush=True)


if __name__ == "__main__":
    main()
