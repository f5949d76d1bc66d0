# SPDX-License-Identifier: BSD-3-Clause
"""A steady DNS load for restart tests (issue 20): queries at a fixed rate over UDP, clients
that never retry, and a record of every query: when it was sent, whether and when it was
answered, and the answer itself (raw; parsed only when a test asks).

    load = SteadyLoad(port, pick=lambda i: f"c{i % 1000}.fake.test.", rate=3000, duration=6)
    load.start()          # a thread of its own
    ...                   # restart the daemon meanwhile
    records = load.join() # every Query, sent or answered, in order

Bounded: at most rate * duration queries, and join() returns at most `timeout` after the last
one was sent. Several source sockets (each its own port and ID space, 16-bit IDs) keep IDs
unique among queries in flight. Reusable by any restart test (socket activation, takeover).
"""

import select
import socket
import struct
import threading
import time

import dns.message
import dns.rcode
import dns.rdatatype


class Query:
    __slots__ = ("index", "name", "sent", "answered", "wire")

    def __init__(self, index, name, sent):
        self.index = index
        self.name = name
        self.sent = sent  # time.monotonic()
        self.answered = None  # time.monotonic() of the answer, or None
        self.wire = None

    @property
    def latency(self):
        return None if self.answered is None else self.answered - self.sent

    def message(self):
        return dns.message.from_wire(self.wire) if self.wire is not None else None

    def rcode(self):
        return None if self.wire is None else self.wire[3] & 0x0F

    def a_addrs(self):
        msg = self.message()
        if msg is None:
            return []
        return sorted(rd.address for rrset in msg.answer if rrset.rdtype == dns.rdatatype.A for rd in rrset)


class SteadyLoad:
    def __init__(self, port, pick, rate=3000, duration=6.0, host="127.0.0.1", sockets=16,
                 timeout=2.0, max_queries=100_000):
        """`pick(i)` names the i-th query (an absolute name; type A)."""
        self.port = port
        self.host = host
        self.pick = pick
        self.rate = rate
        self.duration = duration
        self.timeout = timeout
        self.total = min(int(rate * duration), max_queries)
        self.queries = []
        self.errors = []
        self._socks = []
        for _ in range(sockets):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.bind((host, 0))
            s.setblocking(False)
            self._socks.append(s)
        self._by_sock = {s.fileno(): {} for s in self._socks}  # fd -> {id: Query}
        self._wires = {}
        self._thread = None
        self.started_at = None

    def _wire(self, name):
        w = self._wires.get(name)
        if w is None:
            w = dns.message.make_query(name, "A").to_wire()
            self._wires[name] = w
        return w

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def join(self):
        self._thread.join(self.duration + self.timeout + 30)
        for s in self._socks:
            s.close()
        return self.queries

    def _receive(self, fds_ready, now):
        for s in fds_ready:
            table = self._by_sock[s.fileno()]
            while True:
                try:
                    data = s.recv(4096)
                except BlockingIOError:
                    break
                except OSError as e:
                    self.errors.append(repr(e))
                    break
                if len(data) < 12:
                    continue
                q = table.pop(struct.unpack("!H", data[:2])[0], None)
                if q is not None and q.answered is None:
                    q.answered = now
                    q.wire = data

    def _run(self):
        t0 = time.monotonic()
        self.started_at = t0
        sent = 0
        n = len(self._socks)
        end = t0 + self.duration + self.timeout
        while True:
            now = time.monotonic()
            due = min(self.total, int((now - t0) * self.rate) + 1)
            while sent < due:
                sock = self._socks[sent % n]
                qid = (sent // n) & 0xFFFF
                name = self.pick(sent)
                q = Query(sent, name, time.monotonic())
                wire = bytearray(self._wire(name))
                wire[0:2] = struct.pack("!H", qid)
                self._by_sock[sock.fileno()][qid] = q
                self.queries.append(q)
                try:
                    sock.sendto(bytes(wire), (self.host, self.port))
                except OSError as e:
                    self.errors.append(repr(e))
                sent += 1
            if sent >= self.total and all(not t for t in self._by_sock.values()):
                return
            if now >= end:
                return
            wait = max(0.0, min(t0 + (sent + 1) / self.rate - time.monotonic(), 0.01))
            ready, _, _ = select.select(self._socks, [], [], wait)
            self._receive(ready, time.monotonic())


def unanswered(queries, within=2.0):
    """Queries without an answer, or answered later than `within` seconds."""
    return [q for q in queries if q.answered is None or q.latency > within]
