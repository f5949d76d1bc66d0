# SPDX-License-Identifier: BSD-3-Clause
"""Client-side helpers for nscache's integration tests (dnspython plus raw sockets)."""

import select
import socket
import struct
import subprocess
import time

import dns.flags
import dns.message
import dns.name
import dns.query
import dns.rcode
import dns.rdatatype

LOOPBACK = "127.0.0.1"


def make_query(name, rdtype="A", payload=None, rd=True, qid=None):
    if payload is not None:
        q = dns.message.make_query(name, rdtype, use_edns=0, payload=payload)
    else:
        q = dns.message.make_query(name, rdtype)
    if not rd:
        q.flags &= ~dns.flags.RD
    if qid is not None:
        q.id = qid
    return q


def udp_raw(port, wire, host=LOOPBACK, source=None, timeout=3.0):
    """Send raw bytes over UDP; return the raw reply or None on timeout."""
    fam = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(fam, socket.SOCK_DGRAM) as s:
        if source:
            s.bind((source, 0))
        s.settimeout(timeout)
        s.sendto(wire, (host, port))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data, _ = s.recvfrom(65535)
                return data
            except socket.timeout:
                return None
    return None


def udp(port, name, rdtype="A", payload=None, host=LOOPBACK, source=None, timeout=3.0, query=None):
    """Ask over UDP; return the parsed reply (raises dns.exception.Timeout on silence)."""
    q = query if query is not None else make_query(name, rdtype, payload)
    return dns.query.udp(q, host, port=port, timeout=timeout, source=source,
                         ignore_unexpected=True, raise_on_truncation=False)


def tcp(port, name, rdtype="A", payload=None, host=LOOPBACK, source=None, timeout=5.0, query=None):
    q = query if query is not None else make_query(name, rdtype, payload)
    return dns.query.tcp(q, host, port=port, timeout=timeout, source=source)


def tcp_raw_exchange(port, messages, host=LOOPBACK, timeout=5.0, expect=None):
    """Write all `messages` (wire) on one TCP connection before reading, then read up to
    `expect` (default len(messages)) length-prefixed replies. Returns a list of raw replies
    (fewer if the connection closes or the time runs out)."""
    expect = len(messages) if expect is None else expect
    out = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.sendall(b"".join(struct.pack("!H", len(m)) + m for m in messages))
        buf = b""
        deadline = time.monotonic() + timeout
        while len(out) < expect and time.monotonic() < deadline:
            while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
                n = struct.unpack("!H", buf[:2])[0]
                out.append(buf[2:2 + n])
                buf = buf[2 + n:]
            if len(out) >= expect:
                break
            s.settimeout(max(0.05, deadline - time.monotonic()))
            try:
                chunk = s.recv(65535)
            except (socket.timeout, ConnectionResetError):
                break
            if not chunk:
                break
            buf += chunk
        while len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0] and len(out) < expect:
            n = struct.unpack("!H", buf[:2])[0]
            out.append(buf[2:2 + n])
            buf = buf[2 + n:]
    return out


def many_udp(port, queries, host=LOOPBACK, timeout=5.0):
    """Send each query (dns.message) from its own socket at once, then collect replies.
    Returns a list of parsed replies (None where none came) in the order of `queries`."""
    socks = []
    try:
        for q in queries:
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.setblocking(False)
            s.bind((LOOPBACK, 0))
            socks.append(s)
        for s, q in zip(socks, queries):
            s.sendto(q.to_wire(), (host, port))
        replies = [None] * len(queries)
        index = {s.fileno(): i for i, s in enumerate(socks)}
        pending = set(s.fileno() for s in socks)
        deadline = time.monotonic() + timeout
        by_fd = {s.fileno(): s for s in socks}
        while pending and time.monotonic() < deadline:
            r, _, _ = select.select([by_fd[f] for f in pending], [], [], max(0.0, deadline - time.monotonic()))
            for s in r:
                try:
                    data = s.recv(65535)
                except BlockingIOError:
                    continue
                i = index[s.fileno()]
                try:
                    m = dns.message.from_wire(data)
                except Exception:
                    continue
                if m.id != queries[i].id:
                    continue
                replies[i] = m
                pending.discard(s.fileno())
        return replies
    finally:
        for s in socks:
            s.close()


def a_addrs(msg):
    out = []
    for rr in msg.answer:
        if rr.rdtype == dns.rdatatype.A:
            out.extend(r.address for r in rr)
    return sorted(out)


def aaaa_addrs(msg):
    out = []
    for rr in msg.answer:
        if rr.rdtype == dns.rdatatype.AAAA:
            out.extend(r.address for r in rr)
    return sorted(out)


def answer_ttl(msg, rdtype=None):
    ttls = [rr.ttl for rr in msg.answer if rdtype is None or rr.rdtype == dns.rdatatype.from_text(rdtype)]
    assert ttls, f"no answer records in {msg}"
    return min(ttls)


def soa_ttl(msg):
    soas = [rr for rr in msg.authority if rr.rdtype == dns.rdatatype.SOA]
    assert soas, f"no SOA in the authority section of:\n{msg}"
    return soas[0].ttl


def header(wire):
    """(id, flags, qd, an, ns, ar) of a raw message."""
    return struct.unpack("!HHHHHH", wire[:12])


def rcode_of(wire):
    return header(wire)[1] & 0x000F


def question_bytes(wire):
    """The raw bytes of the first question (name as written, uncompressed, plus type and
    class), parsed without lower-casing."""
    pos = 12
    while True:
        n = wire[pos]
        if n == 0:
            pos += 1
            break
        assert n < 64, "compressed or odd label in a question"
        pos += 1 + n
    return wire[12:pos + 4]


def run(cmd, timeout=20, check=False, **kw):
    """subprocess.run with captured text output and a bounded time."""
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=check, **kw)


def wait_until(pred, timeout=5.0, interval=0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(interval)
    return pred()


def closed_within(sock, timeout):
    """True when the peer closes (or resets) `sock` within `timeout` seconds."""
    sock.settimeout(timeout)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if not sock.recv(65535):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False
