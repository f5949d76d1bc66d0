# SPDX-License-Identifier: BSD-3-Clause
"""A scriptable DNS over HTTPS server (HTTP/2 over TLS with ALPN h2, python3-h2) for the faults
a real server will not make on demand.

mode "answer": POSTs answered (`queries` records what came) 200 with A records from `records` (NXDOMAIN otherwise);
mode "status": every request answered with HTTP status `status` and no DNS message;
mode "goaway": a GOAWAY with last-stream-id 0 as soon as a request arrives, then the
connection is closed. `requests` counts the requests seen, `connections` the connections."""

import socket
import ssl
import threading

import dns.message
import dns.rcode
import dns.rrset
import h2.config
import h2.connection
import h2.events


class FakeDohServer:
    def __init__(self, certfile, keyfile, mode="answer", status=503):
        self.ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.ctx.load_cert_chain(certfile, keyfile)
        self.ctx.set_alpn_protocols(["h2"])
        self.mode = mode
        self.status = status
        self.records = {}
        self.requests = 0
        self.connections = 0
        self.errors = []
        self.queries = []  # (DNS ID, body length, content-type) of each POST answered
        self.content_types = {}
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

    def _serve(self, conn):
        try:
            conn.settimeout(5)
            tls = self.ctx.wrap_socket(conn, server_side=True)
            tls.settimeout(0.5)
            h2c = h2.connection.H2Connection(h2.config.H2Configuration(client_side=False))
            h2c.initiate_connection()
            tls.sendall(h2c.data_to_send())
            bodies = {}
            for _ in range(10000):  # bounded: a test connection never lives this long
                if self._stop.is_set():
                    return
                try:
                    data = tls.recv(65536)
                except (socket.timeout, TimeoutError):
                    continue
                if not data:
                    return
                for event in h2c.receive_data(data):
                    if isinstance(event, h2.events.RequestReceived):
                        self.requests += 1
                        bodies[event.stream_id] = b""
                        self.content_types[event.stream_id] = dict(event.headers).get(
                            b"content-type")
                        if self.mode == "goaway":
                            h2c.close_connection(last_stream_id=0)
                            tls.sendall(h2c.data_to_send())
                            return
                    elif isinstance(event, h2.events.DataReceived):
                        h2c.acknowledge_received_data(event.flow_controlled_length,
                                                      event.stream_id)
                        bodies[event.stream_id] = bodies.get(event.stream_id, b"") + event.data
                    elif isinstance(event, h2.events.StreamEnded):
                        self._respond(h2c, event.stream_id, bodies.pop(event.stream_id, b""))
                tls.sendall(h2c.data_to_send())
        except Exception as e:  # noqa: BLE001 - recorded for the test to see
            if not self._stop.is_set():
                self.errors.append(repr(e))
        finally:
            conn.close()

    def _respond(self, h2c, stream_id, body):
        if self.mode == "status":
            h2c.send_headers(stream_id, [(":status", str(self.status)),
                                         ("content-length", "0")], end_stream=True)
            return
        query = dns.message.from_wire(body)
        self.queries.append((query.id, len(body), self.content_types.get(stream_id)))
        resp = dns.message.make_response(query)
        q = query.question[0]
        name = q.name.to_text().lower()
        if name in self.records:
            resp.answer.append(dns.rrset.from_text(q.name, 300, "IN", "A", self.records[name]))
        else:
            resp.set_rcode(dns.rcode.NXDOMAIN)
        wire = resp.to_wire()
        h2c.send_headers(stream_id, [(":status", "200"),
                                     ("content-type", "application/dns-message"),
                                     ("content-length", str(len(wire)))])
        h2c.send_data(stream_id, wire, end_stream=True)
