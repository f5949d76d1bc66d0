# SPDX-License-Identifier: BSD-3-Clause
"""Keeping answers coming through faults and hostile input (issue 3): serve-stale across an
upstream outage, prefetch across expiry, upstream health (mark down, probe back up), a
garbage flood, a forged-answer flood, many idle TCP clients, and oversized TCP frames.

Persistence (cache-file) is in test_persistence.py, rate limiting in test_ratelimit.py.
All traffic stays on 127.0.0.1; every socket and process is closed by the test or its fixtures.
"""

import random
import resource
import socket
import struct
import threading
import time

import dns.edns
import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

import fakeupstream
from fakeupstream import FORGED_A
from harness import ZONE, bulk_addr
from dnshelpers import (closed_within, a_addrs, answer_ttl, header, make_query, many_udp, tcp, tcp_raw_exchange, udp,
                        wait_until)


def upstream_stats(stats, port):
    """The `upstreams[]` entry of the upstream on 127.0.0.1:`port`."""
    for u in stats["upstreams"]:
        if str(u["address"]).endswith(f":{port}"):
            return u
    raise AssertionError(f"no upstream with port {port} in {stats['upstreams']}")


def replace_records(fake, name, rdtype, ttl, *rdatas):
    rrset = dns.rrset.from_text(name, ttl, "IN", rdtype, *rdatas)
    with fake.lock:
        fake.records[(rrset.name.to_text().lower(), rrset.rdtype)] = [rrset]


# --------------------------------------------------------------------------------------
# 1. Serve-stale: stale answers while the upstream is down, fresh ones once it is back.
#    (test_cache.py covers one stale answer and `serve-stale = false` giving SERVFAIL.)
# --------------------------------------------------------------------------------------

def test_stale_while_upstream_down_then_fresh_when_back(daemon, fake_upstream):
    name = "flaky.fake.test"
    old, new = "192.0.2.140", "192.0.2.141"
    fake_upstream.add(f"{name}.", "A", 1, old)
    d = daemon(fake_upstream.addr)
    assert a_addrs(udp(d.port, name)) == [old]
    fake_upstream.mode = "drop"
    time.sleep(1.3)  # the 1 s entry has expired; the upstream is silent
    s0 = d.stats()
    for i in range(3):
        r = udp(d.port, name, timeout=6)
        assert r.rcode() == dns.rcode.NOERROR, \
            f"query {i} while the upstream is down: {dns.rcode.to_text(r.rcode())}, want a stale answer"
        assert a_addrs(r) == [old]
        assert answer_ttl(r) == 30, f"stale answer {i} has TTL {answer_ttl(r)}, want 30 (RFC 8767)"
        served = d.stats()["stale_served"]
        assert served == s0["stale_served"] + i + 1, f"answer {i} did not come from the stale path"

    assert fake_upstream.count(name=name) >= 2, "no refresh was tried while serving stale data"

    # The upstream is back, with new data: the next refresh puts it in the cache.
    replace_records(fake_upstream, f"{name}.", "A", 120, new)
    fake_upstream.mode = "normal"
    seen = []
    deadline = time.monotonic() + 8
    r = None
    while time.monotonic() < deadline:
        r = udp(d.port, name, timeout=6)
        seen.append((a_addrs(r), r.answer[0].ttl if r.answer else None))
        if a_addrs(r) == [new]:
            break
        assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == [old] and answer_ttl(r) == 30, \
            f"before the refresh lands only the stale answer is right; got {seen[-1]}"
        time.sleep(0.2)
    assert r is not None and a_addrs(r) == [new], f"the new data never arrived within 8 s: {seen}"
    assert 100 <= answer_ttl(r) <= 120, f"fresh answer has TTL {answer_ttl(r)}, want ~120"
    # ... and is now a cache hit
    n = fake_upstream.count(name=name)
    r = udp(d.port, name)
    assert a_addrs(r) == [new] and answer_ttl(r) > 30
    assert fake_upstream.count(name=name) == n, "the refreshed entry was not cached"


def test_serve_expired_answers_at_once_and_refreshes_in_background(daemon, fake_upstream):
    name = "expiring.fake.test"
    old, new = "192.0.2.150", "192.0.2.151"
    fake_upstream.add(f"{name}.", "A", 1, old)
    d = daemon(fake_upstream.addr, config="serve-expired = true\n")
    assert a_addrs(udp(d.port, name)) == [old]
    time.sleep(1.3)  # expired, but within stale-ttl
    replace_records(fake_upstream, f"{name}.", "A", 120, new)
    fake_upstream.delay_ms = 1000  # a slow refresh must not hold the client up
    # Without serve-expired the client would wait the second and get the new address.
    r = udp(d.port, name, timeout=6)
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == [old], "want the expired answer at once"
    assert answer_ttl(r) == 30, f"expired answer has TTL {answer_ttl(r)}, want 30 (RFC 8767)"
    # The background refresh lands and later clients get the new data.
    deadline = time.monotonic() + 6
    while time.monotonic() < deadline and a_addrs(udp(d.port, name)) != [new]:
        time.sleep(0.2)
    r = udp(d.port, name)
    assert a_addrs(r) == [new] and answer_ttl(r) > 30, "the background refresh never arrived"
    assert d.stats()["stale_served"] >= 1


# --------------------------------------------------------------------------------------
# 2. Prefetch keeps a popular name from ever missing across its expiry.
# --------------------------------------------------------------------------------------

@pytest.mark.threaded
def test_prefetch_popular_name_never_misses(daemon, fake_upstream):
    name, addr, ttl = "steady.fake.test", "192.0.2.150", 4
    fake_upstream.add(f"{name}.", "A", ttl, addr)
    d = daemon(fake_upstream.addr)
    s0 = d.stats()
    answers = []
    t_start = time.monotonic()
    while time.monotonic() - t_start < 2 * ttl + 0.6:  # two TTLs and a bit: two expiries crossed
        r = udp(d.port, name, timeout=3)
        answers.append((round(time.monotonic() - t_start, 2), r))
        time.sleep(0.1)
    for t, r in answers:
        assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == [addr], f"at {t} s: {r}"
        assert 1 <= answer_ttl(r) <= ttl, f"at {t} s: TTL {answer_ttl(r)}"
    s = d.stats()
    misses = s["cache_misses"] - s0["cache_misses"]
    hits = s["cache_hits"] - s0["cache_hits"]
    upstream_times = [q["time"] for q in fake_upstream.queries if q["name"] == f"{name}."]
    assert misses == 1, \
        f"{misses} cache misses over {len(answers)} queries (want only the first); upstream asked at " \
        f"{[round(t - t_start, 2) for t in upstream_times]} s"
    assert hits == len(answers) - 1
    assert s["prefetches"] >= 1, s["prefetches"]
    assert len(upstream_times) >= 3, \
        f"upstream asked {len(upstream_times)} times in {2 * ttl + 0.6} s of a {ttl} s TTL: no refresh"
    for a, b in zip(upstream_times, upstream_times[1:]):
        assert b - a < ttl, f"refresh {b - a:.2f} s after the previous fetch: after expiry (TTL {ttl})"


# --------------------------------------------------------------------------------------
# 3. Upstream health: a dead upstream is marked down and then costs nothing; a background
#    probe marks it up when it answers again.
# --------------------------------------------------------------------------------------

def _pair_on(host, port):
    """UDP socket and TCP listener bound on a given port (a revived upstream's address)."""
    udp_sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp_sock.bind((host, port))
    tcp_sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp_sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        tcp_sock.bind((host, port))
    except OSError:
        udp_sock.close()
        tcp_sock.close()
        raise
    return udp_sock, tcp_sock, port


def _drain_names(sock):
    """Names of the queries waiting on a never-read UDP socket."""
    names = []
    sock.setblocking(False)
    while True:
        try:
            data = sock.recv(65535)
        except (BlockingIOError, InterruptedError):
            return names
        try:
            m = dns.message.from_wire(data)
            names.append(m.question[0].name.to_text().lower() if m.question else None)
        except Exception:
            names.append("<unparsable>")


def test_dead_upstream_marked_down_then_probed_back_up(daemon, make_fake, dead_upstream, monkeypatch):
    dead = dead_upstream()
    good = make_fake()
    for i in range(20):
        good.add(f"h{i}.fake.test.", "A", 300, f"192.0.2.{160 + i}")
    d = daemon([dead.addr, good.addr])

    # Six different names at once: with no RTT known yet, each tries the first (dead) upstream,
    # waits one attempt timeout, and is answered by the second. Six timeouts in a row.
    replies = many_udp(d.port, [make_query(f"h{i}.fake.test") for i in range(6)], timeout=6)
    for i, r in enumerate(replies):
        assert r is not None and a_addrs(r) == [f"192.0.2.{160 + i}"], f"h{i}: {r}"
    assert wait_until(lambda: upstream_stats(d.stats(), dead.port)["up"] is False, timeout=5), \
        f"dead upstream not marked down after 6 timeouts: {d.stats()['upstreams']}"
    assert upstream_stats(d.stats(), good.port)["up"] is True
    assert "marked down" in d.stderr_text(), d.stderr_text()

    # Now misses go straight to the live upstream: no client query reaches the dead one, so
    # none waits for an attempt to time out (probes of the dead one are not client attempts).
    _drain_names(dead.sock)
    before = d.stats()
    dead_queries = upstream_stats(before, dead.port)["queries"]
    for i in range(6, 20):
        r = udp(d.port, f"h{i}.fake.test", timeout=5)
        assert a_addrs(r) == [f"192.0.2.{160 + i}"]
    after = d.stats()
    assert after["upstream_timeouts"] == before["upstream_timeouts"], \
        "a client query waited for the upstream marked down"
    assert upstream_stats(after, good.port)["queries"] >= upstream_stats(before, good.port)["queries"] + 14
    leaked = [n for n in _drain_names(dead.sock) if n != "."]
    assert not leaked, f"client queries still sent to the upstream marked down: {leaked}"
    assert upstream_stats(d.stats(), dead.port)["queries"] == dead_queries

    # The dead upstream comes back: a fake server on the same address and port.
    port = dead.port
    dead.sock.close()
    with monkeypatch.context() as m:
        m.setattr(fakeupstream, "free_port_pair", lambda host="127.0.0.1", attempts=50: _pair_on(host, port))
        back = make_fake()
    assert back.port == port
    assert wait_until(lambda: upstream_stats(d.stats(), port)["up"] is True, timeout=10, interval=0.1), \
        f"revived upstream still down after 10 s: {d.stats()['upstreams']}; " \
        f"it got {len(back.queries)} queries"
    assert back.count(name=".") >= 1, \
        f"marked up without a probe reaching it? queries: {[q['name'] for q in back.queries]}"
    assert "answers again" in d.stderr_text()
    # and it serves clients again
    back.add("revived.fake.test.", "A", 300, "192.0.2.199")
    good.add("revived.fake.test.", "A", 300, "192.0.2.199")
    assert a_addrs(udp(d.port, "revived.fake.test", timeout=5)) == ["192.0.2.199"]


# --------------------------------------------------------------------------------------
# 5. 10,000 garbage packets, then a valid query.
# --------------------------------------------------------------------------------------

def _name_wire(name):
    return b"".join(bytes([len(l)]) + l.encode() for l in name.split(".") if l) + b"\x00"


def _garbage(rng, valid):
    """One packet of a deterministic mix of malformed inputs."""
    kind = rng.randrange(9)
    qid = rng.getrandbits(16)
    hdr = struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    qtail = struct.pack("!HH", rng.choice([1, 28, 255, 0, 41, 252, 65535]), rng.choice([1, 3, 255, 0]))
    if kind == 0:  # random bytes
        return rng.randbytes(rng.randint(0, 600))
    if kind == 1:  # truncated header or question
        return valid[:rng.randint(0, len(valid) - 1)]
    if kind == 2:  # labels that run off the end / overlong labels / bad label types
        bad = bytes([rng.choice([64, 65, 0x7F, 0x80, 0xBF]) if rng.random() < 0.3 else rng.randint(1, 63)
                     for _ in range(rng.randint(1, 40))])
        return hdr + bad + (qtail if rng.random() < 0.5 else b"")
    if kind == 3:  # compression pointers in the question: loops, forward, out of the packet
        ptr = rng.choice([b"\xc0\x0c", b"\xc0\x0e", b"\xff\xff", b"\xc0\x00", b"\x03abc\xc0\x0c",
                          b"\x01a\xc0\x10", b"\xc0"])
        return hdr + ptr + qtail
    if kind == 4:  # names over 255 bytes
        labels = b"".join(b"\x3f" + rng.randbytes(63) for _ in range(rng.randint(4, 6)))
        return hdr + labels + b"\x00" + qtail
    if kind == 5:  # bit flips of a valid query
        b = bytearray(valid)
        for _ in range(rng.randint(1, 6)):
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        return bytes(b)
    if kind == 6:  # header counts that lie
        counts = struct.pack("!HHHH", rng.choice([0, 2, 65535]), rng.choice([0, 1, 65535]),
                             rng.choice([0, 7, 65535]), rng.choice([0, 1, 2, 65535]))
        return struct.pack("!HH", qid, rng.getrandbits(16) & 0x7FFF) + counts + valid[12:]
    if kind == 7:  # a broken OPT record after a valid question
        opt = b"\x00" + struct.pack("!HHIH", 41, rng.getrandbits(16), rng.getrandbits(32),
                                    rng.choice([0, 4, 200, 65535])) + rng.randbytes(rng.randint(0, 8))
        return struct.pack("!HHHHHH", qid, 0x0100, 1, 0, 0, rng.choice([1, 2])) + valid[12:] + opt
    # kind 8: a response (QR=1) or another opcode, with random trailing bytes
    flags = rng.choice([0x8180, 0x8100, 0x0900, 0x2100, 0x7800])
    return struct.pack("!HH", qid, flags) + valid[4:] + rng.randbytes(rng.randint(0, 40))


@pytest.mark.threaded
def test_ten_thousand_garbage_packets_then_valid_query(daemon, nsd):
    d = daemon(nsd.addr)
    valid = make_query(f"www.{ZONE}", "A").to_wire()
    rng = random.Random(0x5EED)
    packets = [_garbage(rng, valid) for _ in range(10_000)]
    s0 = d.stats()
    socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(8)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        deadline = time.monotonic() + 30
        for i, p in enumerate(packets):
            socks[i % len(socks)].sendto(p, ("127.0.0.1", d.port))
            if i % 250 == 249:
                time.sleep(0.002)  # let the workers keep up; the kernel drops the rest
                assert time.monotonic() < deadline, "send loop over 30 s"
    finally:
        for s in socks:
            s.close()
    time.sleep(0.3)
    assert d.proc.poll() is None, f"daemon died under garbage:\n{d.stderr_text()[-3000:]}"
    q = make_query(f"www.{ZONE}", "A", qid=0x1234)
    r = udp(d.port, None, query=q, timeout=5)
    assert r.id == 0x1234 and r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.1"]
    assert a_addrs(tcp(d.port, f"www.{ZONE}", timeout=5)) == ["192.0.2.1"]
    s1 = d.stats()
    got = s1["queries"] - s0["queries"]
    assert got >= 1000, f"the daemon saw only {got} of 10,000 packets: did it stop reading?"
    assert s1["answers_formerr"] > s0["answers_formerr"]


# --------------------------------------------------------------------------------------
# 6. A forged-answer flood while a query is outstanding.
# --------------------------------------------------------------------------------------

def _victim_attempts(fake, name):
    """{daemon source port: set of query IDs} of the UDP queries the fake upstream got for `name`."""
    out = {}
    with fake.lock:
        qs = [q for q in fake.queries if q["transport"] == "udp" and q["name"] == name]
    for q in qs:
        out.setdefault(q["source"][1], set()).add(q["id"])
    return out


@pytest.mark.threaded
def test_forged_answer_flood_puts_nothing_false_in_cache(daemon, fake_upstream):
    name = "victim.fake.test."
    real, real_ttl = "192.0.2.180", 2
    fake_upstream.add(name, "A", real_ttl, real)
    fake_upstream.delays[name] = 600  # the query stays outstanding while the flood runs
    # The fake upstream also sends its own forgeries (wrong ID, wrong question, wrong type, wrong
    # source) just before the real answer.
    fake_upstream.forge = ["wrong_id", "wrong_question", "wrong_qtype", "wrong_source"]
    d = daemon(fake_upstream.addr)
    s0 = d.stats()

    forged = dns.message.make_response(make_query(name, "A"))
    forged.flags |= dns.flags.AA
    forged.answer.append(dns.rrset.from_text(name, 3600, "IN", "A", FORGED_A))
    forged_wire = bytearray(forged.to_wire())

    result = {}

    def client():
        try:
            result["reply"] = udp(d.port, name, timeout=6)
        except Exception as e:
            result["error"] = e

    client_thread = threading.Thread(target=client)
    client_thread.start()
    try:
        assert wait_until(lambda: _victim_attempts(fake_upstream, name), timeout=3, interval=0.005), \
            "the daemon never asked the upstream"
        sent = {"own_port": 0, "other_ports": 0}
        stop_at = time.monotonic() + 0.55  # inside the 600 ms the real answer is held back
        avoid = {d.port, fake_upstream.port, fake_upstream.forge_sock.getsockname()[1]}

        def from_upstream_port():
            # Guessed IDs from the upstream's own address and port, at every source port the
            # daemon used for this question. Every ID but the real one: a right guess of port
            # and ID is indistinguishable from the answer (that is what the random ID and port
            # are for), so the test skips exactly those.
            wire = bytearray(forged_wire)
            next_id = random.Random(7).getrandbits(16)
            attempts = _victim_attempts(fake_upstream, name)
            while sent["own_port"] < 10_000 and time.monotonic() < stop_at:
                if sent["own_port"] % 200 == 0:
                    attempts = _victim_attempts(fake_upstream, name)
                for port, ids in attempts.items():
                    next_id = (next_id + 1) & 0xFFFF
                    if next_id in ids:
                        continue
                    struct.pack_into("!H", wire, 0, next_id)
                    try:
                        fake_upstream.udp.sendto(wire, ("127.0.0.1", port))
                    except OSError:
                        pass
                    sent["own_port"] += 1

        def from_other_ports():
            # Any ID (the real ones included) from other loopback ports, at the daemon's source
            # ports and a few ports on either side.
            wire = bytearray(forged_wire)
            socks = [socket.socket(socket.AF_INET, socket.SOCK_DGRAM) for _ in range(4)]
            try:
                for s in socks:
                    s.bind(("127.0.0.1", 0))
                qid = 0
                while sent["other_ports"] < 10_000 and time.monotonic() < stop_at:
                    attempts = _victim_attempts(fake_upstream, name)
                    targets = sorted({p + k for p in attempts for k in range(-4, 5)
                                      if 1024 <= p + k <= 65535} - avoid)
                    for _ in range(50):
                        for port in targets:
                            ids = attempts.get(port)
                            qid = (qid + 1) & 0xFFFF
                            struct.pack_into("!H", wire, 0, next(iter(ids)) if ids and qid % 16 == 0 else qid)
                            try:
                                socks[qid % len(socks)].sendto(wire, ("127.0.0.1", port))
                            except OSError:
                                pass
                            sent["other_ports"] += 1
            finally:
                for s in socks:
                    s.close()

        flooders = [threading.Thread(target=from_upstream_port), threading.Thread(target=from_other_ports)]
        for t in flooders:
            t.start()
        for t in flooders:
            t.join(timeout=10)
        assert not any(t.is_alive() for t in flooders), "flood threads did not stop"
    finally:
        client_thread.join(timeout=10)
    assert "error" not in result, f"the client got no answer during the flood: {result.get('error')!r}"
    r = result["reply"]
    attempts = _victim_attempts(fake_upstream, name)
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == [real], \
        f"client got {a_addrs(r)} ({dns.rcode.to_text(r.rcode())}) after {sent} forged packets"
    s1 = d.stats()
    dropped = s1["dropped_mismatched"] - s0["dropped_mismatched"]
    assert sent["own_port"] >= 500 and sent["other_ports"] >= 500, sent
    print(f"forged packets sent {sent}, dropped_mismatched +{dropped}, {len(attempts)} attempt ports")
    assert dropped >= 50, f"only {dropped} mismatched answers dropped of {sent} sent to {len(attempts)} ports"

    # Nothing false in the cache: the name itself, and the names and types the forgeries
    # answered (wrong_question is about evil-victim.fake.test, wrong_qtype about AAAA).
    fake_upstream.forge = []
    fake_upstream.delays.clear()
    n = fake_upstream.count(name=name)
    r = udp(d.port, name)
    assert a_addrs(r) == [real], f"cache holds {a_addrs(r)} after the flood"
    assert fake_upstream.count(name=name) == n, "the real answer was not cached"
    r = udp(d.port, "evil-victim.fake.test")
    assert r.rcode() == dns.rcode.NXDOMAIN and FORGED_A not in a_addrs(r), r
    assert fake_upstream.count(name="evil-victim.fake.test") == 1, "a forged question was cached"
    r = udp(d.port, name, "AAAA")
    assert r.rcode() == dns.rcode.NOERROR and not r.answer, f"a forged AAAA/A answer was cached: {r}"
    n = fake_upstream.count(name=name)  # the AAAA query went upstream too
    # After the real answer's TTL, a forged record (TTL 3600) would still be there if it had
    # got in: the name must be fetched again, with the real data.
    time.sleep(real_ttl + 0.3)
    r = udp(d.port, name)
    assert a_addrs(r) == [real], f"after the real TTL the cache answers {a_addrs(r)}"
    assert answer_ttl(r) <= real_ttl
    assert fake_upstream.count(name=name) == n + 1, "the expired entry was not fetched again"
    assert d.proc.poll() is None


# --------------------------------------------------------------------------------------
# 7. 500 idle TCP connections do not delay UDP answers.
# --------------------------------------------------------------------------------------

@pytest.fixture
def nofile_limit():
    """Raise this process's RLIMIT_NOFILE to at least `need` (restored at teardown)."""
    saved = resource.getrlimit(resource.RLIMIT_NOFILE)

    def ensure(need):
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft >= need:
            return
        if hard != resource.RLIM_INFINITY and hard < need:
            pytest.skip(f"RLIMIT_NOFILE hard limit {hard} < {need}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))

    try:
        yield ensure
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, saved)


def _read_frame(sock, timeout):
    sock.settimeout(timeout)
    buf = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(buf) >= 2 and len(buf) >= 2 + struct.unpack("!H", buf[:2])[0]:
            return buf[2:2 + struct.unpack("!H", buf[:2])[0]]
        chunk = sock.recv(65535)
        if not chunk:
            break
        buf += chunk
    return None


@pytest.mark.threaded
def test_500_idle_tcp_connections_do_not_delay_udp(daemon, nsd, nofile_limit):
    n_conns = 500
    nofile_limit(n_conns + 200)
    d = daemon(nsd.addr, config='max-tcp-connections = 700\nmax-tcp-per-client = 700\n'
                                'tcp-idle-timeout = "60s"\n')
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]
    s0 = d.stats()
    conns = []
    try:
        for i in range(n_conns):
            c = socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5)
            if i % 10 == 5:
                c.sendall(b"\x00")  # a slow client: half a length prefix
            elif i % 10 == 7:
                q = make_query(f"www.{ZONE}", "A").to_wire()
                c.sendall(struct.pack("!H", len(q)) + q[:5])  # half a query
            conns.append(c)
        assert wait_until(lambda: d.stats()["tcp_connections"] - s0["tcp_connections"] >= n_conns, timeout=5), \
            f"daemon accepted {d.stats()['tcp_connections'] - s0['tcp_connections']} of {n_conns} connections"
        assert d.stats()["tcp_rejected"] == s0["tcp_rejected"]
        # Every UDP query answered at its first send (the client's 3 s is a guard, not a bound).
        before = d.stats()
        for i in range(40):
            name, want = (f"www.{ZONE}", "192.0.2.1") if i % 2 == 0 else (f"bulk{i}.{ZONE}", bulk_addr(i))
            r = udp(d.port, name, timeout=3)
            assert a_addrs(r) == [want], f"{name}: {r}"
        after = d.stats()
        assert after["queries_udp"] - before["queries_udp"] == 40, "a UDP query was lost or retried"
        assert after["tcp_connections"] - s0["tcp_connections"] >= n_conns
        # The idle connections were kept, and still answer.
        for c in conns[::100]:
            q = make_query(f"www.{ZONE}", "A", qid=0x5151)
            w = q.to_wire()
            c.sendall(struct.pack("!H", len(w)) + w)
            reply = _read_frame(c, 5)
            assert reply is not None, "an idle connection within the limit was closed"
            assert a_addrs(dns.message.from_wire(reply)) == ["192.0.2.1"]
        assert d.proc.poll() is None
    finally:
        for c in conns:
            c.close()


# --------------------------------------------------------------------------------------
# 9. A TCP length prefix over the largest query (4096 bytes) closes the connection.
# --------------------------------------------------------------------------------------


def test_tcp_length_prefix_over_limit_closes_connection(daemon, nsd):
    d = daemon(nsd.addr)
    for length in (4097, 0x2000, 0xFFFF):
        with socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5) as s:
            s.sendall(struct.pack("!H", length) + make_query(f"www.{ZONE}", "A").to_wire())
            assert closed_within(s, 3), f"length prefix {length} (> 4096): connection still open after 3 s"
    # A query of exactly 4096 bytes (EDNS padding) is within the limit and answered.
    base = make_query(f"www.{ZONE}", "A", payload=1232)
    pad = 4096 - len(base.to_wire()) - 4
    q = dns.message.make_query(f"www.{ZONE}", "A", use_edns=0, payload=1232,
                               options=[dns.edns.GenericOption(12, b"\x00" * pad)])
    q.id = 0x4096
    w = q.to_wire(max_size=65535)
    assert len(w) == 4096
    raw = tcp_raw_exchange(d.tcp_port, [w], timeout=5)
    assert len(raw) == 1 and header(raw[0])[0] == 0x4096, "a 4096-byte query got no answer over TCP"
    assert d.proc.poll() is None
    assert a_addrs(tcp(d.tcp_port, f"www.{ZONE}")) == ["192.0.2.1"]
