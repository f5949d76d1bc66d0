# SPDX-License-Identifier: BSD-3-Clause
"""The DNS over HTTPS listener (RFC 8484) against HTTP/2 clients that python3-h2 drives frame by
frame: 100 concurrent streams on one connection all answered; cache-control max-age counting
down with the TTL; a POST with ID 0; a stream whose body never comes reset at read-timeout while
the connection's other streams and other clients are answered; SETTINGS and PING floods and an
HPACK bomb ending the connection with GOAWAY ENHANCE_YOUR_CALM while other clients are answered.
(kdig, dig, curl, the error statuses and rapid reset: test_encrypted_listeners.py.)"""

import socket
import ssl
import time

import dns.message
import pytest

from dnshelpers import make_query
from harness import ZONE, bulk_addr
from test_encrypted_listeners import CURL, b64url, client_context, curl, doh_url, pki, start  # noqa: F401

h2 = pytest.importorskip("h2.connection")
import h2.config  # noqa: E402
import h2.events  # noqa: E402
import h2.exceptions  # noqa: E402
import h2.settings  # noqa: E402
import hyperframe.frame  # noqa: E402

ENHANCE_YOUR_CALM = 0xB
CANCEL = 0x8


class H2Client:
    """One TLS connection with ALPN h2 and an h2 client state machine over it."""

    def __init__(self, d, pki, validate=True):
        ctx = client_context(pki)
        ctx.set_alpn_protocols(["h2"])
        raw = socket.create_connection(("127.0.0.1", d.doh_port), timeout=5)
        self.sock = ctx.wrap_socket(raw, server_hostname="dns.test")
        assert self.sock.selected_alpn_protocol() == "h2"
        config = h2.config.H2Configuration(client_side=True, validate_outbound_headers=validate,
                                           normalize_outbound_headers=validate)
        self.conn = h2.connection.H2Connection(config=config)
        self.conn.initiate_connection()
        self.flush()
        self.responses = {}  # stream id -> {"status", "headers", "body", "ended", "reset"}
        self.goaway = None   # the GOAWAY's error code
        self.closed = False

    def flush(self):
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def post(self, wire, end_stream=True):
        sid = self.conn.get_next_available_stream_id()
        self.conn.send_headers(sid, [(":method", "POST"), (":scheme", "https"),
                                     (":authority", "dns.test"), (":path", "/dns-query"),
                                     ("content-type", "application/dns-message"),
                                     ("content-length", str(len(wire)))])
        if end_stream:
            self.conn.send_data(sid, wire, end_stream=True)
        self.responses[sid] = {"status": None, "headers": {}, "body": b"", "ended": False,
                               "reset": None}
        return sid

    def pump(self, until, timeout=8.0):
        """Reads and handles events until `until()` is true, the server closes, or `timeout`."""
        deadline = time.monotonic() + timeout
        while not until() and not self.closed and time.monotonic() < deadline:
            self.sock.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                break
            except (ssl.SSLError, OSError):
                self.closed = True
                break
            if not data:
                self.closed = True
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self.closed = True
                break
            for e in events:
                self._handle(e)
            try:
                self.flush()
            except (ssl.SSLError, OSError):
                self.closed = True
        return until()

    def _handle(self, e):
        if isinstance(e, h2.events.ResponseReceived):
            r = self.responses[e.stream_id]
            r["headers"] = {k.decode(): v.decode() for k, v in e.headers}
            r["status"] = int(r["headers"][":status"])
        elif isinstance(e, h2.events.DataReceived):
            self.responses[e.stream_id]["body"] += e.data
            self.conn.acknowledge_received_data(e.flow_controlled_length, e.stream_id)
        elif isinstance(e, h2.events.StreamEnded):
            self.responses[e.stream_id]["ended"] = True
        elif isinstance(e, h2.events.StreamReset):
            if e.stream_id in self.responses:
                self.responses[e.stream_id]["reset"] = e.error_code
        elif isinstance(e, h2.events.ConnectionTerminated):
            self.goaway = e.error_code

    def closes_within(self, timeout):
        """True when the server ends the connection (EOF or reset) within `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while not self.closed and time.monotonic() < deadline:
            self.pump(lambda: False, timeout=max(0.05, deadline - time.monotonic()))
        return self.closed

    def close(self):
        self.sock.close()


def answered_by_curl(d, pki):
    query = b64url(make_query(f"www.{ZONE}", qid=0).to_wire())
    r = curl(d, pki, "-o", "/dev/null", "-w", "%{http_code}", doh_url(d) + "?dns=" + query)
    return r.stdout == b"200"


def test_hundred_concurrent_streams_on_one_connection_all_answered(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    c = H2Client(d, pki)
    # Misses, so that answers come from upstream in any order, each on its own stream.
    sids = {c.post(make_query(f"bulk{i}.{ZONE}", qid=i).to_wire()): i for i in range(100)}
    c.flush()
    assert c.pump(lambda: all(c.responses[s]["ended"] for s in sids), timeout=15), \
        [s for s in sids if not c.responses[s]["ended"]]
    for sid, i in sids.items():
        r = c.responses[sid]
        assert r["status"] == 200, (i, r)
        m = dns.message.from_wire(r["body"])
        assert m.id == i
        assert [rd.address for rr in m.answer for rd in rr] == [bulk_addr(i)]
    assert not c.closed
    c.close()
    s = d.stats()
    assert s["doh_connections"] == 1 and s["doh_status_200"] >= 100


def test_post_with_id_zero_and_max_age_counting_down(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    c = H2Client(d, pki)
    first = c.post(make_query(f"www.{ZONE}", qid=0).to_wire())
    c.flush()
    assert c.pump(lambda: c.responses[first]["ended"])
    r = c.responses[first]
    assert r["status"] == 200
    assert r["headers"]["content-type"] == "application/dns-message"
    assert int(r["headers"]["content-length"]) == len(r["body"])
    assert dns.message.from_wire(r["body"]).id == 0
    age = int(r["headers"]["cache-control"].removeprefix("max-age="))
    assert 0 < age <= 300

    def later_age():
        sid = c.post(make_query(f"www.{ZONE}", qid=0).to_wire())
        c.flush()
        assert c.pump(lambda: c.responses[sid]["ended"])
        return int(c.responses[sid]["headers"]["cache-control"].removeprefix("max-age="))

    deadline = time.monotonic() + 6
    later = later_age()
    while later >= age and time.monotonic() < deadline:
        time.sleep(0.3)
        later = later_age()
    assert later < age, "max-age must count down with the cached TTL"
    c.close()


def test_stream_without_body_reset_others_answered(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path, extra='tcp-read-timeout = "1s"\n')
    c = H2Client(d, pki)
    stalled = c.post(make_query(f"www.{ZONE}").to_wire(), end_stream=False)  # no DATA, ever
    c.flush()
    other = c.post(make_query(f"www.{ZONE}", qid=7).to_wire())
    c.flush()
    assert c.pump(lambda: c.responses[other]["ended"])
    assert c.responses[other]["status"] == 200  # the same connection's other stream
    assert answered_by_curl(d, pki)              # and another client
    assert c.pump(lambda: c.responses[stalled]["reset"] is not None, timeout=8)
    assert c.responses[stalled]["reset"] == CANCEL
    assert not c.closed
    c.close()
    assert d.stats()["doh_streams_timed_out"] >= 1


def flood(c, frame_bytes, count):
    """Writes `count` copies of a raw frame; stops when the server has closed."""
    try:
        for _ in range(count):
            c.sock.sendall(frame_bytes)
    except (ssl.SSLError, OSError):
        c.closed = True


def test_settings_flood_closed_with_enhance_your_calm(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    c = H2Client(d, pki)
    settings = hyperframe.frame.SettingsFrame(0)
    settings.settings = {h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 100}
    flood(c, settings.serialize(), 1000)
    assert c.closes_within(8)
    assert c.goaway in (None, ENHANCE_YOUR_CALM)  # the GOAWAY may be lost in the reset
    assert answered_by_curl(d, pki)
    assert d.stats()["doh_abuse_closed"] >= 1


def test_ping_flood_closed_with_enhance_your_calm(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    c = H2Client(d, pki)
    c.pump(lambda: False, timeout=0.3)  # the server's SETTINGS, acknowledged
    ping = hyperframe.frame.PingFrame(0)
    ping.opaque_data = b"12345678"
    flood(c, ping.serialize(), 1000)
    assert c.closes_within(8)
    assert c.goaway in (None, ENHANCE_YOUR_CALM)
    assert answered_by_curl(d, pki)
    assert d.stats()["doh_abuse_closed"] >= 1


def test_hpack_bomb_closed_others_answered(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    c = H2Client(d, pki, validate=False)
    c.pump(lambda: False, timeout=0.3)
    query = b64url(make_query(f"www.{ZONE}").to_wire())
    # One 4 KB field, sent once into the HPACK table and then referenced by index: a few
    # bytes on the wire, 200 KB once decoded.
    bomb = [(":method", "GET"), (":scheme", "https"), (":authority", "dns.test"),
            (":path", "/dns-query?dns=" + query)] + [("x-bomb", "b" * 4000)] * 50
    try:
        c.conn.send_headers(c.conn.get_next_available_stream_id(), bomb, end_stream=True)
        c.flush()
    except (ssl.SSLError, OSError):
        c.closed = True
    assert c.closes_within(8)
    assert c.goaway in (None, ENHANCE_YOUR_CALM)
    assert answered_by_curl(d, pki)
    assert d.stats()["doh_abuse_closed"] >= 1
