# SPDX-License-Identifier: BSD-3-Clause
"""UDP and TCP transport: TCP, pipelining, truncation and EDNS sizes, echo of ID and question."""

import socket
import struct
import time

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import pytest

from harness import ZONE, big_txt_strings, bulk_addr
from dnshelpers import (a_addrs, aaaa_addrs, header, make_query, question_bytes, run, tcp,
                        tcp_raw_exchange, udp, udp_raw)


def txt_strings(msg):
    return sorted(b"".join(rd.strings).decode() for rr in msg.answer if rr.rdtype == dns.rdatatype.TXT
                  for rd in rr)


def test_tcp_query(daemon, nsd):
    d = daemon(nsd.addr)
    assert d.tcp_port == d.port, "UDP and TCP must share the port number"
    r = tcp(d.port, f"www.{ZONE}", "A")
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.1"]
    # a second one from the cache, over a new connection
    r = tcp(d.port, f"www.{ZONE}", "A")
    assert a_addrs(r) == ["192.0.2.1"]
    out = run(["dig", "@127.0.0.1", "-p", str(d.port), "+tcp", "+short", "+time=3", "+tries=1",
               f"dual.{ZONE}", "AAAA"])
    assert out.returncode == 0 and out.stdout.split() == ["2001:db8::3"], out.stdout + out.stderr
    s = d.stats()
    assert s["queries_tcp"] >= 3


@pytest.mark.threaded
def test_tcp_pipelined_queries(daemon, nsd):
    d = daemon(nsd.addr)
    wanted = [(f"www.{ZONE}", "A"), (f"alias.{ZONE}", "A"), (f"dual.{ZONE}", "AAAA"),
              (f"nope.{ZONE}", "A"), (f"big.{ZONE}", "TXT")] + [(f"bulk{i}.{ZONE}", "A") for i in range(10)]
    queries = []
    for i, (name, rdtype) in enumerate(wanted):
        queries.append(make_query(name, rdtype, qid=0x1000 + i))
    raw = tcp_raw_exchange(d.port, [q.to_wire() for q in queries], timeout=8)
    assert len(raw) == len(queries), f"got {len(raw)} of {len(queries)} pipelined answers"
    by_id = {}
    for w in raw:
        m = dns.message.from_wire(w)
        assert m.id not in by_id, "duplicate answer"
        by_id[m.id] = m
    assert sorted(by_id) == sorted(q.id for q in queries)
    assert a_addrs(by_id[0x1000]) == ["192.0.2.1"]
    assert a_addrs(by_id[0x1001]) == ["192.0.2.1"]
    assert aaaa_addrs(by_id[0x1002]) == ["2001:db8::3"]
    assert by_id[0x1003].rcode() == dns.rcode.NXDOMAIN
    assert txt_strings(by_id[0x1004]) == sorted(big_txt_strings())
    for i in range(10):
        m = by_id[0x1005 + i]
        assert m.question[0].name.to_text() == f"bulk{i}.{ZONE}."
        assert a_addrs(m) == [bulk_addr(i)]


@pytest.mark.threaded
def test_tcp_pipelined_with_slow_upstream(daemon, fake_upstream):
    # One slow name must not hold back the answers to the others on the same connection
    # (RFC 7766 6.2.1.1: answers may come out of order). Whether the slow upstream's answer
    # itself is used is test_upstream.py::test_slow_upstream_answer_is_used.
    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.30")
    for i in range(5):
        fake_upstream.add(f"fast{i}.fake.test.", "A", 300, f"192.0.2.{31 + i}")
    d = daemon(fake_upstream.addr)
    # Prime the fast names so they are cache hits; then make the upstream slow.
    for i in range(5):
        udp(d.port, f"fast{i}.fake.test")
    fake_upstream.delay_ms = 500
    qs = [make_query("slow.fake.test", "A", qid=0x2000)] + \
         [make_query(f"fast{i}.fake.test", "A", qid=0x2001 + i) for i in range(5)]
    raw = tcp_raw_exchange(d.port, [q.to_wire() for q in qs], timeout=8)
    assert len(raw) == 6
    msgs = [dns.message.from_wire(w) for w in raw]
    order = [m.id for m in msgs]
    assert order[-1] == 0x2000, f"the slow answer should come last, order: {[hex(i) for i in order]}"
    ids = {m.id: m for m in msgs}
    for i in range(5):
        assert a_addrs(ids[0x2001 + i]) == [f"192.0.2.{31 + i}"]
    assert ids[0x2000].question[0].name.to_text() == "slow.fake.test."


def test_tcp_query_split_across_writes(daemon, nsd):
    d = daemon(nsd.addr)
    q = make_query(f"www.{ZONE}", "A", qid=0x3333).to_wire()
    framed = struct.pack("!H", len(q)) + q
    with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
        s.sendall(framed[:1])
        time.sleep(0.1)
        s.sendall(framed[1:7])
        time.sleep(0.1)
        s.sendall(framed[7:])
        buf = b""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            if len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                break
            chunk = s.recv(4096)
            if not chunk:
                break
            buf += chunk
    assert len(buf) >= 2
    m = dns.message.from_wire(buf[2:2 + struct.unpack("!H", buf[:2])[0]])
    assert m.id == 0x3333 and a_addrs(m) == ["192.0.2.1"]


def test_tcp_idle_connection_is_closed(daemon, nsd):
    d = daemon(nsd.addr, config='tcp-idle-timeout = "1s"\n')
    with socket.create_connection(("127.0.0.1", d.port), timeout=8) as s:
        q = make_query(f"www.{ZONE}", "A").to_wire()
        s.sendall(struct.pack("!H", len(q)) + q)
        t0 = time.monotonic()
        closed = False
        got = b""
        while time.monotonic() - t0 < 8:
            try:
                chunk = s.recv(4096)
            except ConnectionResetError:
                closed = True
                break
            except socket.timeout:
                break
            if not chunk:
                closed = True
                break
            got += chunk
        assert len(got) > 2, "no answer before the idle close"
        assert closed, "idle TCP connection was not closed within 8 s (tcp-idle-timeout 1s)"


@pytest.mark.parametrize("payload", [None, 512, 1232, 4096])
def test_big_answer_truncated_over_udp(daemon, nsd, payload):
    d = daemon(nsd.addr)
    q = make_query(f"big.{ZONE}", "TXT", payload=payload)
    r = udp(d.port, None, query=q, timeout=5)
    assert r.id == q.id
    assert r.question == q.question
    assert r.flags & dns.flags.TC, f"answer > {payload or 512} bytes (and > 1232) must be truncated"
    limit = 512 if payload is None else min(max(payload, 512), 1232)
    assert len(r.to_wire()) <= limit
    if payload is None:
        assert r.edns < 0, "no OPT record in an answer to a query without EDNS"
    # over TCP the whole RRset arrives
    r = tcp(d.port, f"big.{ZONE}", "TXT")
    assert not r.flags & dns.flags.TC
    assert txt_strings(r) == sorted(big_txt_strings())
    assert d.stats()["answers_truncated"] >= 1


def test_big_answer_with_dig_and_kdig(daemon, nsd):
    d = daemon(nsd.addr)
    out = run(["dig", "@127.0.0.1", "-p", str(d.port), "+ignore", "+bufsize=512", "+time=3", "+tries=1",
               f"big.{ZONE}", "TXT"])
    assert out.returncode == 0, out.stdout + out.stderr
    flags_line = next(l for l in out.stdout.splitlines() if ";; flags:" in l)
    assert " tc" in flags_line.split(";")[2], flags_line
    # dig retries over TCP by itself after TC=1
    out = run(["dig", "@127.0.0.1", "-p", str(d.port), "+short", "+bufsize=1232", "+time=3", "+tries=1",
               f"big.{ZONE}", "TXT"])
    assert out.returncode == 0 and len(out.stdout.strip().splitlines()) == len(big_txt_strings()), out.stdout
    out = run(["kdig", "@127.0.0.1", "-p", str(d.port), "+tcp", "+time=3", "+retry=0", f"big.{ZONE}", "TXT"])
    assert out.returncode == 0 and "NOERROR" in out.stdout, out.stdout + out.stderr
    assert sum(1 for l in out.stdout.splitlines() if "\tTXT\t" in l or " TXT " in l) >= len(big_txt_strings())


def test_small_answer_not_truncated(daemon, nsd):
    d = daemon(nsd.addr)
    r = udp(d.port, f"multi.{ZONE}", "A")
    assert not r.flags & dns.flags.TC
    assert len(a_addrs(r)) == 3


def test_edns_presence_echoed(daemon, nsd):
    d = daemon(nsd.addr)
    r = udp(d.port, f"www.{ZONE}", "A", payload=1232)
    assert r.edns == 0, "an EDNS query gets an OPT record back"
    assert a_addrs(r) == ["192.0.2.1"]
    r = udp(d.port, f"www.{ZONE}", "A")
    assert r.edns < 0, "a query without EDNS gets no OPT record (RFC 6891)"
    assert a_addrs(r) == ["192.0.2.1"]


def _exchange_raw_udp(port, wire):
    data = udp_raw(port, wire, timeout=5)
    assert data is not None, "no answer"
    return data


@pytest.mark.parametrize("asked", ["WwW.ExAmple.TEST", "wWW.eXAMPLE.tEST", "www.example.test"])
def test_id_and_question_echoed_exactly(daemon, nsd, asked):
    d = daemon(nsd.addr)
    # First a miss with one spelling, then hits with others: every answer echoes the
    # question as the client wrote it, byte for byte.
    for spelling in (asked, asked.swapcase(), asked):
        q = make_query(spelling, "A", qid=0xBEEF)
        w = q.to_wire()
        a = _exchange_raw_udp(d.port, w)
        assert header(a)[0] == 0xBEEF
        assert header(a)[1] & 0x8000, "QR must be set"
        assert question_bytes(a) == question_bytes(w), f"question changed for {spelling}"
        assert a_addrs(dns.message.from_wire(a)) == ["192.0.2.1"]
        # and over TCP
        raw = tcp_raw_exchange(d.port, [w])
        assert len(raw) == 1
        assert header(raw[0])[0] == 0xBEEF and question_bytes(raw[0]) == question_bytes(w)
    # NXDOMAIN from the cache keeps the case too
    for spelling in ("NoPe.ExAmPlE.tEsT", "nOpE.eXaMpLe.TeSt"):
        w = make_query(spelling, "A", qid=0x0102).to_wire()
        a = _exchange_raw_udp(d.port, w)
        assert header(a)[0] == 0x0102 and question_bytes(a) == question_bytes(w)
        assert header(a)[1] & 0xF == dns.rcode.NXDOMAIN


def test_rd_flag_and_ra(daemon, nsd):
    d = daemon(nsd.addr)
    r = udp(d.port, f"www.{ZONE}", "A")
    assert r.flags & dns.flags.QR
    assert r.flags & dns.flags.RD, "RD is copied from the query"
    assert r.flags & dns.flags.RA, "a recursive service sets RA"


def test_ipv6_listener(daemon, nsd):
    d = daemon(nsd.addr, listen=("[::1]:0", "127.0.0.1:0"))
    port6 = d.listening.get(("udp", "::1"))
    assert port6, f"no 'listening on udp [::1]:PORT' line:\n{d.stderr_text()}"
    assert d.listening.get(("tcp", "::1")) == port6
    r = udp(port6, f"www.{ZONE}", "A", host="::1")
    assert a_addrs(r) == ["192.0.2.1"]
    r = tcp(port6, f"www.{ZONE}", "A", host="::1")
    assert a_addrs(r) == ["192.0.2.1"]


def test_transport_counters(daemon, nsd):
    d = daemon(nsd.addr)
    s0 = d.stats()
    for _ in range(3):
        udp(d.port, f"www.{ZONE}")
    for _ in range(2):
        tcp(d.port, f"www.{ZONE}")
    s1 = d.stats()
    assert s1["queries_udp"] - s0["queries_udp"] == 3
    assert s1["queries_tcp"] - s0["queries_tcp"] == 2
    assert s1["queries"] - s0["queries"] == 5


def test_tcp_connection_limit(daemon, nsd):
    d = daemon(nsd.addr, config="max-tcp-connections = 2\n")
    q = make_query(f"www.{ZONE}", "A").to_wire()
    framed = struct.pack("!H", len(q)) + q

    def ask(s, timeout=2.0):
        """Send one query; return True if an answer came, False on close/reset/silence."""
        try:
            s.sendall(framed)
            s.settimeout(timeout)
            data = s.recv(4096)
            return len(data) > 2
        except (ConnectionResetError, BrokenPipeError, socket.timeout):
            return False

    held = [socket.create_connection(("127.0.0.1", d.port), timeout=5) for _ in range(2)]
    try:
        assert all(ask(s) for s in held), "connections within the limit must be served"
        extra = socket.create_connection(("127.0.0.1", d.port), timeout=5)
        try:
            assert not ask(extra), "a connection beyond max-tcp-connections was served"
        finally:
            extra.close()
    finally:
        for s in held:
            s.close()
    # once the others are gone, new connections are served again
    ok = False
    deadline = time.monotonic() + 5
    while not ok and time.monotonic() < deadline:
        with socket.create_connection(("127.0.0.1", d.port), timeout=5) as s:
            ok = ask(s)
        if not ok:
            time.sleep(0.2)
    assert ok
    assert d.stats().get("queries_tcp", 0) >= 3
