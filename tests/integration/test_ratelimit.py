# SPDX-License-Identifier: BSD-3-Clause
"""Rate limiting per client prefix (issue 3): only non-loopback clients are limited, so the
daemon runs in a network namespace this test creates, with a veth pair to a second namespace
where the client sockets live (addresses in 198.18.0.0/15, the benchmarking range, inside
those namespaces only). Both namespaces are deleted at teardown, even on failure.

Sockets are placed in a namespace by switching only the calling thread into it with setns(2)
for the moment a socket is created (or the daemon is started): a socket stays in the
namespace it was created in, and a child process starts in its parent thread's namespace.
"""

import contextlib
import ctypes
import os
import random
import re
import select
import shutil
import socket
import struct
import subprocess
import time

import dns.flags
import dns.message
import dns.rcode
import pytest

from dnshelpers import a_addrs, make_query, tcp, udp

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def _setns(fd):
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name):
    """Run the block with this thread in network namespace `name` (from `ip netns add`)."""
    home = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/run/netns/{name}", os.O_RDONLY)
    try:
        _setns(target)
        try:
            yield
        finally:
            _setns(home)  # if this fails the thread is lost in the namespace: let it raise
    finally:
        os.close(target)
        os.close(home)


def _ip(*args):
    return subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)


class NetnsPair:
    def __init__(self, server, client, server_ip, client_ip):
        self.server = server
        self.client = client
        self.server_ip = server_ip
        self.client_ip = client_ip


@pytest.fixture
def netns_pair():
    """Two fresh network namespaces joined by a veth pair: `server` (198.18.N.1/24, lo up)
    and `client` (198.18.N.2/24)."""
    if os.geteuid() != 0:
        pytest.skip("creating network namespaces needs root")
    if shutil.which("ip") is None:
        pytest.skip("`ip` (iproute2) is not installed")
    tag = f"{os.getpid() % 100000}{random.randrange(16 ** 3):03x}"
    server, client = f"nscrl-s{tag}", f"nscrl-c{tag}"
    veth_s, veth_c = f"nrs{tag}"[:15], f"nrc{tag}"[:15]
    octet = random.randrange(256)
    server_ip, client_ip = f"198.18.{octet}.1", f"198.18.{octet}.2"
    created = []
    try:
        r = _ip("netns", "add", server)
        if r.returncode != 0:
            pytest.skip(f"`ip netns add` is unavailable here: {r.stderr.strip()}")
        created.append(server)
        r = _ip("netns", "add", client)
        assert r.returncode == 0, r.stderr
        created.append(client)
        for args in (["link", "add", veth_s, "netns", server, "type", "veth", "peer", "name", veth_c,
                      "netns", client],
                     ["-n", server, "addr", "add", f"{server_ip}/24", "dev", veth_s],
                     ["-n", client, "addr", "add", f"{client_ip}/24", "dev", veth_c],
                     ["-n", server, "link", "set", veth_s, "up"],
                     ["-n", client, "link", "set", veth_c, "up"],
                     ["-n", server, "link", "set", "lo", "up"],
                     ["-n", client, "link", "set", "lo", "up"]):
            r = _ip(*args)
            if r.returncode != 0:
                pytest.skip(f"cannot set up the test namespaces (`ip {' '.join(args)}`): {r.stderr.strip()}")
        try:
            with in_netns(client):
                pass
        except OSError as e:
            pytest.skip(f"setns(2) into a network namespace is not allowed here: {e}")
        yield NetnsPair(server, client, server_ip, client_ip)
    finally:
        for name in reversed(created):
            r = _ip("netns", "del", name)
            if r.returncode != 0:
                print(f"warning: could not delete network namespace {name}: {r.stderr}")


def _burst(sock, host, port, name, count=100, wait=1.5):
    """Send `count` queries for `name` at once from `sock`; return {id: reply} of those answered."""
    ids = list(range(0x100, 0x100 + count))
    for qid in ids:
        sock.sendto(make_query(name, "A", qid=qid).to_wire(), (host, port))
    replies = {}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and len(replies) < count:
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        data = sock.recv(65535)
        try:
            m = dns.message.from_wire(data)
        except Exception:
            continue
        if m.id in ids:
            replies[m.id] = m
    return replies


def _start_in_namespace(ns, daemon, make_fake, action, allow_client=True):
    """A fake upstream and the daemon, both inside the server namespace. With `allow_client`
    false the client's prefix is left out of `allow`."""
    with in_netns(ns.server):
        fake = make_fake()  # 127.0.0.1 of the server namespace
        fake.add("limited.fake.test.", "A", 300, "192.0.2.230")
        client_prefix = f', "{ns.client_ip.rsplit(".", 1)[0]}.0/24"' if allow_client else ""
        cfg = (f'allow = ["127.0.0.0/8", "::1/128"{client_prefix}]\n'
               f'rate-limit = 10\nrate-limit-burst = 10\nrate-limit-action = "{action}"\n')
        d = daemon(fake.addr, config=cfg, listen=("127.0.0.1:0", f"{ns.server_ip}:0"))
    remote_port = d.listening.get(("udp", ns.server_ip))
    assert remote_port, f"no 'listening on udp {ns.server_ip}:PORT' line:\n{d.stderr_text()}"
    assert d.listening.get(("tcp", ns.server_ip)) == remote_port
    return fake, d, remote_port


def _client_socket(ns):
    with in_netns(ns.client):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((ns.client_ip, 0))
    return s


def _loopback_burst_in_server_ns(ns, d):
    with in_netns(ns.server):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.bind(("127.0.0.1", 0))
        return _burst(s, "127.0.0.1", d.port, "limited.fake.test")
    finally:
        s.close()


def test_rate_limit_drop(netns_pair, daemon, make_fake):
    ns = netns_pair
    fake, d, port = _start_in_namespace(ns, daemon, make_fake, "drop")
    s0 = d.stats()
    sock = _client_socket(ns)
    try:
        # One query first: the path works, and the answer is cached.
        sock.sendto(make_query("limited.fake.test", qid=0x42).to_wire(), (ns.server_ip, port))
        sock.settimeout(3)
        first = dns.message.from_wire(sock.recv(65535))
        assert first.id == 0x42 and a_addrs(first) == ["192.0.2.230"]
        time.sleep(1.1)  # the bucket refills
        replies = _burst(sock, ns.server_ip, port, "limited.fake.test")
    finally:
        sock.close()
    s1 = d.stats()
    limited = s1["rate_limited"] - s0["rate_limited"]
    assert 1 <= len(replies) <= 30, \
        f"{len(replies)} of 100 queries in a burst answered with rate-limit 10/s, burst 10 (drop)"
    for m in replies.values():
        assert a_addrs(m) == ["192.0.2.230"] and not m.flags & dns.flags.TC
    assert limited >= 100 - len(replies) - 5, f"rate_limited grew by {limited}, {len(replies)} answered"
    assert limited > 0
    # Loopback clients are never limited, even on the same daemon.
    replies = _loopback_burst_in_server_ns(ns, d)
    assert len(replies) == 100, f"only {len(replies)} of 100 loopback queries answered"
    assert d.stats()["rate_limited"] == s1["rate_limited"], "a loopback client was rate limited"


@pytest.mark.threaded
def test_rate_limit_truncate(netns_pair, daemon, make_fake):
    ns = netns_pair
    fake, d, port = _start_in_namespace(ns, daemon, make_fake, "truncate")
    s0 = d.stats()
    sock = _client_socket(ns)
    try:
        replies = _burst(sock, ns.server_ip, port, "limited.fake.test")
    finally:
        sock.close()
    s1 = d.stats()
    truncated = [m for m in replies.values() if m.flags & dns.flags.TC]
    full = [m for m in replies.values() if not m.flags & dns.flags.TC]
    assert len(replies) >= 95, f"only {len(replies)} of 100 answered with action truncate"
    assert len(truncated) >= 60, f"{len(truncated)} TC=1 answers of {len(replies)} (rate-limit 10/s, burst 10)"
    assert 1 <= len(full) <= 30, f"{len(full)} full answers in a burst of 100"
    for m in truncated:
        assert not m.answer and m.rcode() == dns.rcode.NOERROR, m
        assert m.question and m.question[0].name.to_text() == "limited.fake.test."
    for m in full:
        assert a_addrs(m) == ["192.0.2.230"]
    assert s1["rate_limited"] - s0["rate_limited"] >= len(truncated)
    # The same question over TCP (not limited) gets the answer, from the same client.
    with in_netns(ns.client):
        for _ in range(3):
            r = tcp(port, "limited.fake.test", host=ns.server_ip, source=ns.client_ip, timeout=5)
            assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.230"]
            assert not r.flags & dns.flags.TC
    replies = _loopback_burst_in_server_ns(ns, d)
    assert len(replies) == 100 and not any(m.flags & dns.flags.TC for m in replies.values()), \
        "a loopback client was rate limited"


def test_loopback_clients_never_limited(daemon, fake_upstream):
    # Without namespaces: the limit is on, every client is loopback, nobody is limited.
    fake_upstream.add("lo.fake.test.", "A", 300, "192.0.2.231")
    d = daemon(fake_upstream.addr, config='rate-limit = 10\nrate-limit-burst = 10\nrate-limit-action = "drop"\n')
    assert a_addrs(udp(d.port, "lo.fake.test")) == ["192.0.2.231"]
    for source in ("127.0.0.1", "127.0.0.9"):
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        try:
            s.bind((source, 0))
            replies = _burst(s, "127.0.0.1", d.port, "lo.fake.test")
        finally:
            s.close()
        assert len(replies) == 100, f"{source}: {len(replies)} of 100 answered"
        assert all(a_addrs(m) == ["192.0.2.231"] for m in replies.values())
    assert d.stats()["rate_limited"] == 0


def _raw_burst(sock, host, port, wires, wait=1.5):
    """Send raw queries (each with its own ID in its first two bytes) at once; return
    {id: raw reply} of those answered."""
    ids = {struct.unpack("!H", w[:2])[0] for w in wires}
    for w in wires:
        sock.sendto(w, (host, port))
    replies = {}
    deadline = time.monotonic() + wait
    while time.monotonic() < deadline and len(replies) < len(wires):
        ready, _, _ = select.select([sock], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        data = sock.recv(65535)
        if len(data) >= 12 and struct.unpack("!H", data[:2])[0] in ids:
            replies[struct.unpack("!H", data[:2])[0]] = data
    return replies


def _two_questions(qid):
    question = make_query("limited.fake.test", qid=qid).to_wire()[12:]
    return struct.pack("!HHHHHH", qid, 0x0100, 2, 0, 0, 0) + question + question


@pytest.mark.parametrize("action", ["drop", "truncate"])
def test_rate_limit_covers_formerr_answers(netns_pair, daemon, make_fake, action):
    # Malformed queries are answered (FORMERR), so they must be limited like any others: an
    # unlimited error answer is a reflection vector like any other answer.
    ns = netns_pair
    fake, d, port = _start_in_namespace(ns, daemon, make_fake, action)
    s0 = d.stats()
    sock = _client_socket(ns)
    try:
        replies = _raw_burst(sock, ns.server_ip, port, [_two_questions(0x100 + i) for i in range(100)])
    finally:
        sock.close()
    s1 = d.stats()
    formerr = [r for r in replies.values() if r[3] & 0x0F == dns.rcode.FORMERR]
    assert 1 <= len(formerr) <= 30, f"{len(formerr)} FORMERR answers to a burst of 100 (rate-limit 10/s, burst 10)"
    assert s1["rate_limited"] - s0["rate_limited"] >= 100 - len(formerr) - 5
    if action == "truncate":
        truncated = [r for r in replies.values() if r[2] & 0x02]
        assert len(truncated) >= 60 and all(r[3] & 0x0F == 0 for r in truncated)
    assert fake.count() == 0


def test_rate_limit_covers_refused_answers(netns_pair, daemon, make_fake):
    # A sender outside `allow` (a spoofed victim's address, say) is limited too.
    ns = netns_pair
    fake, d, port = _start_in_namespace(ns, daemon, make_fake, "drop", allow_client=False)
    s0 = d.stats()
    sock = _client_socket(ns)
    try:
        replies = _burst(sock, ns.server_ip, port, "limited.fake.test")
    finally:
        sock.close()
    s1 = d.stats()
    assert all(m.rcode() == dns.rcode.REFUSED for m in replies.values())
    assert 1 <= len(replies) <= 30, f"{len(replies)} REFUSED answers to a burst of 100 (rate-limit 10/s, burst 10)"
    assert s1["rate_limited"] - s0["rate_limited"] >= 100 - len(replies) - 5
    assert fake.count() == 0


WARNING_RE = re.compile(r"^(?:<\d>)?warning: .*allow.*rate-limit")


@pytest.mark.parametrize("config,warned", [
    ('allow = ["127.0.0.0/8", "192.0.2.0/24"]\n', True),
    ('allow = ["0.0.0.0/0", "::/0"]\n', True),
    ('allow = ["192.0.2.0/24"]\nrate-limit = 100\n', False),
    ('allow = ["127.0.0.0/8", "::1/128"]\n', False),
    ("", False),  # the default: loopback only
])
def test_warning_when_allow_reaches_beyond_loopback_without_rate_limit(daemon, fake_upstream, config, warned):
    d = daemon(fake_upstream.addr, config=config)
    lines = [l for l in d.stderr_text().splitlines() if WARNING_RE.match(l)]
    assert bool(lines) == warned, f"config {config!r}: warning lines {lines}\n{d.stderr_text()}"
