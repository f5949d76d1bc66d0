# SPDX-License-Identifier: BSD-3-Clause
"""A DNS over TLS server for the tests that need answers in an order of their choosing.

It accepts TLS connections on 127.0.0.1 (certificate and key from the test CA), reads framed
queries (RFC 7858 / RFC 1035 §4.2.2), and once `batch` queries have arrived on a connection
(or 0.5 s passed without another) answers all of them in reverse order of arrival: A records
from `records`, NXDOMAIN otherwise. `connections` counts the connections accepted."""

import socket
import ssl
import struct
import threading

import dns.message
import dns.rcode
import dns.rrset


class ReversingDotServer:
    def __init__(self, certfile, keyfile, batch):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.batch = batch
        self.records = {}
        self.connections = 0
        self.answered_order = []
        self.query_sizes = []
        self.errors = []
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads = []

    def start(self):
        t = threading.Thread(target=self._accept_loop, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=3)
        self.sock.close()

    def _accept_loop(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except (socket.timeout, OSError):
                continue
            self.connections += 1
            t = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            t.start()
            self._threads.append(t)

    def _read_exact(self, tls, n):
        buf = b""
        while len(buf) < n:
            chunk = tls.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed")
            buf += chunk
        return buf

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            tls = self.ctx.wrap_socket(conn, server_side=True)
            tls.settimeout(0.5)
            while not self._stop.is_set():
                held = []
                while len(held) < self.batch:
                    try:
                        (length,) = struct.unpack("!H", self._read_exact(tls, 2))
                        tls.settimeout(5)
                        self.query_sizes.append(length)
                        held.append(dns.message.from_wire(self._read_exact(tls, length)))
                        tls.settimeout(0.5)
                    except (socket.timeout, TimeoutError):
                        break
                for query in reversed(held):
                    tls.sendall(self._answer(query))
                if not held:
                    continue
        except (ConnectionError, OSError, ssl.SSLError) as e:
            if not self._stop.is_set():
                self.errors.append(repr(e))
        finally:
            conn.close()

    def _answer(self, query):
        resp = dns.message.make_response(query)
        q = query.question[0]
        name = q.name.to_text().lower()
        self.answered_order.append(name)
        if name in self.records:
            resp.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", self.records[name]))
        else:
            resp.set_rcode(dns.rcode.NXDOMAIN)
        wire = resp.to_wire()
        return struct.pack("!H", len(wire)) + wire
