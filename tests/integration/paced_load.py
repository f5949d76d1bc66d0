# SPDX-License-Identifier: BSD-3-Clause
"""A paced UDP load for restart tests: `rate` queries a second over several sockets, most
for names the daemon has cached, some for names it has not (misses), each sent once and never
retried, each answer checked. Bounded in count and time (`duration`, then a 2.5 s wait).

Names: c<i>.<zone> (i < cached) answer 10.1.i/256.i%256, m<n>.<zone> answer 10.2.n/256.n%256
(`answer_for` gives the rrset a fake upstream's generator returns).

(A minimal stand-in for tests/integration/steady_load.py of branch i20-activation, to be
reconciled with it.)"""

import selectors
import socket
import struct
import threading
import time

import dns.message
import dns.rrset


def address_of(label):
    kind, n = label[0], int(label[1:])
    return f"10.{1 if kind == 'c' else 2}.{(n // 256) % 256}.{n % 256}"


def answer_for(qname, rdtype, zone):
    """The generator's answer for `qname` (dns.name.Name), or None outside the load's names."""
    text = qname.to_text().lower()
    suffix = f".{zone}."
    if rdtype != 1 or not text.endswith(suffix):
        return None
    label = text[: -len(suffix)]
    if not label or label[0] not in "cm" or not label[1:].isdigit():
        return None
    return [dns.rrset.from_text(text, 300, "IN", "A", address_of(label))]


def query_wire(name):
    q = dns.message.make_query(name, "A")
    q.flags |= 0x0100  # RD
    return bytearray(q.to_wire())


class PacedLoad:
    def __init__(self, port, zone, cached=1000, rate=3000, miss_every=50, sockets=8, duration=8.0,
                 host="127.0.0.1"):
        self.addr = (host, port)
        self.zone, self.cached, self.rate = zone, cached, rate
        self.miss_every, self.duration = miss_every, duration
        self.socks = []
        for _ in range(sockets):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
            s.connect(self.addr)
            self.socks.append(s)
        self.wires = [query_wire(f"c{i}.{zone}") for i in range(cached)]
        self.pending = {}  # (socket index, id) -> (send time, label)
        self.sent = 0
        self.answered = 0
        self.late = []  # (label, seconds)
        self.wrong = []  # (label, why)
        self.answer_times = []  # (receive time, label)
        self.misses_sent = []  # (send time, label)
        self.errors = []
        self._ids = [0] * sockets
        self._thread = None
        self.started_at = None

    def start(self):
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def join(self):
        self._thread.join(self.duration + 10)
        for s in self.socks:
            s.close()

    @property
    def unanswered(self):
        return sorted(label for _, label in self.pending.values())

    def _send(self, i, seq):
        si = seq % len(self.socks)
        qid = self._ids[si] = (self._ids[si] + 1) & 0xFFFF
        if seq % self.miss_every == 0:
            label = f"m{seq // self.miss_every}"
            wire = query_wire(f"{label}.{self.zone}")
            self.misses_sent.append((time.monotonic(), label))
        else:
            label = f"c{i % self.cached}"
            wire = self.wires[i % self.cached]
        struct.pack_into("!H", wire, 0, qid)
        try:
            self.socks[si].send(wire)
        except BlockingIOError:
            self.errors.append("send would block")
            return
        self.pending[(si, qid)] = (time.monotonic(), label)
        self.sent += 1

    def _receive(self, sel, timeout):
        for key, _ in sel.select(timeout):
            si = key.data
            while True:
                try:
                    data = self.socks[si].recv(4096)
                except BlockingIOError:
                    break
                except ConnectionRefusedError:
                    self.errors.append("ICMP port unreachable")
                    break
                now = time.monotonic()
                if len(data) < 12:
                    continue
                qid = struct.unpack_from("!H", data, 0)[0]
                got = self.pending.pop((si, qid), None)
                if got is None:
                    continue
                sent_at, label = got
                self.answered += 1
                self.answer_times.append((now, label))
                if now - sent_at > 2.0:
                    self.late.append((label, now - sent_at))
                rcode = data[3] & 0x0F
                if rcode != 0:
                    self.wrong.append((label, f"rcode {rcode}"))
                elif socket.inet_ntoa(data[-4:]) != address_of(label):
                    self.wrong.append((label, "wrong address"))

    def _run(self):
        sel = selectors.DefaultSelector()
        for i, s in enumerate(self.socks):
            sel.register(s, selectors.EVENT_READ, i)
        self.started_at = start = time.monotonic()
        seq = 0
        while True:
            now = time.monotonic()
            if now - start >= self.duration:
                break
            due = int((now - start) * self.rate)
            while seq < due:
                self._send(seq, seq)
                seq += 1
            self._receive(sel, 0.002)
        end = time.monotonic() + 2.5
        while self.pending and time.monotonic() < end:
            self._receive(sel, 0.05)
        sel.close()
