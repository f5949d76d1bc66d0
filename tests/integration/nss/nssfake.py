# SPDX-License-Identifier: BSD-3-Clause
"""A fake nscache daemon for the NSS module's tests: serves NSCACHE_NSS_SOCKET from a table of
answers, records every request, hands out its map (a sealed memfd) on GET_MAP, and (if
`publish`) writes each answer into the map like the daemon does. Lets the module be tested
exactly, without depending on the daemon's logic.

Run as a script (`python3 nssfake.py DIR`) it serves DIR/fake-nss.sock with one name,
www.example.test -> 192.0.2.66, and prints "ready" and then one line per request: a fake
daemon for tests that need it to run as another user."""

import os
import socket
import struct
import sys
import threading

import nssproto as p


class Answer:
    def __init__(self, status=p.FOUND, ttl=60, canon="", aliases=(), v4=(), v6=(), raw=None):
        self.status, self.ttl = status, ttl
        self.payload = raw if raw is not None else (
            p.encode_payload(canon, aliases, v4, v6) if status == p.FOUND else b"")


class FakeNssDaemon:
    def __init__(self, workdir, slot_count=64, publish=True):
        self.sock_path = str(workdir / "fake-nss.sock")
        self.answers = {}  # (op, family, key data) -> Answer
        self.requests = []  # (op, family, data bytes), lookups only
        self.map_requests = 0  # GET_MAP requests
        self.publish = publish
        self.hang = False  # accept, read, never answer
        self.on_request = None  # called with (op, family, data) for every request
        self.lock = threading.Lock()
        self.map = p.MapWriter(slot_count)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.sock_path)
        self.listener.listen(64)
        self.listener.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    # ---- table ---------------------------------------------------------------------
    def name(self, name, family, answer):
        with self.lock:
            self.answers[(p.BY_NAME, family, name.lower().rstrip(".").encode())] = answer

    def addr(self, text, answer):
        import ipaddress
        a = ipaddress.ip_address(text)
        fam = p.AF_INET if a.version == 4 else p.AF_INET6
        with self.lock:
            self.answers[(p.BY_ADDR, fam, a.packed)] = answer

    def host(self, name, canon=None, aliases=(), v4=(), v6=(), ttl=60):
        """A name with addresses: answers for AF_INET, AF_INET6 and AF_UNSPEC, NODATA where
        a family has none."""
        canon = canon or name
        for fam, a4, a6 in ((p.AF_INET, v4, ()), (p.AF_INET6, (), v6), (p.AF_UNSPEC, v4, v6)):
            if a4 or a6:
                self.name(name, fam, Answer(p.FOUND, ttl, canon, aliases, a4, a6))
            else:
                self.name(name, fam, Answer(p.NODATA, ttl))

    def requests_for(self, name=None):
        with self.lock:
            reqs = list(self.requests)
        if name is None:
            return reqs
        return [r for r in reqs if r[0] == p.BY_NAME and r[2].lower() == name.lower().encode()]

    def clear(self):
        with self.lock:
            self.requests.clear()

    # ---- serving -------------------------------------------------------------------
    def _loop(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (socket.timeout, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _recv(self, conn, n):
        buf = b""
        while len(buf) < n:
            chunk = conn.recv(n - len(buf))
            if not chunk:
                raise ConnectionError
            buf += chunk
        return buf

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            magic, version, op, family, dlen = p.REQUEST.unpack(self._recv(conn, p.REQUEST.size))
            data = self._recv(conn, dlen) if dlen else b""
            if self.on_request is not None:
                self.on_request(op, family, data)
            if op == p.GET_MAP and magic == p.REQUEST_MAGIC and version == p.VERSION:
                with self.lock:
                    self.map_requests += 1
                head = p.RESPONSE.pack(p.RESPONSE_MAGIC, p.VERSION, p.FOUND, family, 0, 8, self.map.map_id)
                socket.send_fds(conn, [head + struct.pack("=Q", self.map.size)], [self.map.fd])
                return
            with self.lock:
                self.requests.append((op, family, data))
                hang = self.hang
            if hang:
                self._stop.wait(10)
                return
            if magic != p.REQUEST_MAGIC or version != p.VERSION:
                ans = Answer(p.UNAVAIL, 0)
            else:
                key = data.lower().rstrip(b".") if op == p.BY_NAME else data
                with self.lock:
                    ans = self.answers.get((op, family, key), Answer(p.NOTFOUND, 30))
            # Published before the answer is sent, so the asker's next lookup hits the map.
            if self.publish and ans.status != p.UNAVAIL and ans.ttl > 0 and \
                    len(ans.payload) + len(data) + 2 <= p.SLOT_DATA:
                self.map.put(op, family, data, ans.status, ans.payload, ttl_s=ans.ttl)
            conn.sendall(p.RESPONSE.pack(p.RESPONSE_MAGIC, p.VERSION, ans.status, family, ans.ttl,
                                         len(ans.payload), self.map.map_id) + ans.payload)
        except (OSError, ConnectionError, struct.error):
            pass
        finally:
            conn.close()

    def stop(self):
        self._stop.set()
        self.map.set_live(0)
        self._thread.join(timeout=3)
        self.listener.close()
        self.map.close()


if __name__ == "__main__":
    from pathlib import Path

    fake = FakeNssDaemon(Path(sys.argv[1]))
    fake.host("www.example.test", v4=["192.0.2.66"])
    fake.on_request = lambda op, family, data: print("request", op, family, data.decode(errors="replace"),
                                                     flush=True)
    print("ready", flush=True)
    try:
        sys.stdin.read()  # until the test closes our stdin
    finally:
        fake.stop()
