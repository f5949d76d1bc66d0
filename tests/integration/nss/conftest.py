# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the NSS module's tests (tests/integration/nss).

- `nss_build`: where the build put libnss_nscache.so.2 and the C test programs (<build>/nss,
  beside NSCACHE_BIN); skips when the module was not built.
- `netns` (session): private network + mount namespaces with the test's resolv.conf
  (nameserver 127.0.0.1, search example.test), hosts and nsswitch.conf
  (`hosts: files nscache dns`); see nsenv.py.
- `dns_nsd` (session): NSD on 127.0.0.1:53 inside `netns`, what glibc's `dns` module asks.
  Its addresses differ from the daemon's upstream (198.51.100.0/24 and 2001:db8:53::/48), so
  every answer tells which path produced it.
- `fake_nss`: a fake daemon (nssfake.py) on a private socket (which hands out its map);
  clients in `netns` use it through NSCACHE_NSS_SOCKET.
- `nss_daemon`: the real `nscache serve` (parent conftest's `daemon` factory) with
  --nss-socket in tmp_path, forwarding to the parent's `fake_upstream` loaded with
  UPSTREAM_RECORDS; skips if this nscache has no --nss-socket.
"""

import os
import subprocess
from pathlib import Path

import pytest

from nsenv import Namespace, NsdInNamespace, NSD_BIN
from nssfake import FakeNssDaemon
from nsspaths import build_dir

RESOLV_CONF = "nameserver 127.0.0.1\nsearch example.test sub.example.test\noptions ndots:1 timeout:1 attempts:2\n"
HOSTS = ("127.0.0.1 localhost\n::1 localhost ip6-localhost\n"
         "192.0.2.250 fromfiles.example.test fromfiles\n")
HOSTS_LINE = "files nscache dns"

# What glibc's own `dns` module sees (NSD in the namespace, 127.0.0.1:53).
DNS_ZONE = """$ORIGIN example.test.
$TTL 300
@ 600 IN SOA ns1 hostmaster 1 3600 900 604800 60
@ 600 IN NS ns1
ns1 IN A 127.0.0.1
www IN A 198.51.100.1
dual IN A 198.51.100.3
dual IN AAAA 2001:db8:53::3
v6only IN AAAA 2001:db8:53::6
alias IN CNAME www
only-dns IN A 198.51.100.50
nx-upstream IN A 198.51.100.99
change IN A 198.51.100.7
"""

# More addresses than getaddrinfo's first buffer holds (glibc asks again with a bigger one).
MANY_ADDRESSES = [f"192.0.2.{100 + i}" for i in range(40)]

# What the daemon's upstream (the parent conftest's fake upstream) serves.
UPSTREAM_RECORDS = [
    ("www.example.test.", "A", 300, ["192.0.2.1"]),
    ("dual.example.test.", "A", 300, ["192.0.2.3"]),
    ("dual.example.test.", "AAAA", 300, ["2001:db8::3"]),
    ("v6only.example.test.", "AAAA", 300, ["2001:db8::6"]),
    ("alias.example.test.", "CNAME", 300, ["www.example.test."]),
    ("alias2.example.test.", "CNAME", 300, ["alias.example.test."]),
    ("multi.example.test.", "A", 300, ["192.0.2.11", "192.0.2.12", "192.0.2.13"]),
    ("host.sub.example.test.", "A", 300, ["192.0.2.21"]),
    ("many.example.test.", "A", 300, MANY_ADDRESSES),
    ("1.2.0.192.in-addr.arpa.", "PTR", 300, ["www.example.test."]),
    ("3.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.8.b.d.0.1.0.0.2.ip6.arpa.", "PTR", 300,
     ["dual.example.test."]),
]


class NssBuild:
    def __init__(self, build):
        self.dir = build / "nss"
        self.module = self.dir / "libnss_nscache.so.2"
        self.client = self.dir / "nss_client"
        self.map_test = self.dir / "nss_map_reader_test"
        self.stress = self.dir / "nss_stress"


@pytest.fixture(scope="session")
def nss_build():
    b = NssBuild(build_dir())
    for f in (b.module, b.client):
        if not f.exists():
            pytest.skip(f"{f} not built")
    return b


def _can_unshare():
    if os.geteuid() != 0:
        return False
    r = subprocess.run(["unshare", "--net", "--mount", "true"], capture_output=True, timeout=10)
    return r.returncode == 0


@pytest.fixture(scope="session")
def netns(nss_build, tmp_path_factory):
    if not _can_unshare():
        pytest.skip("needs root and unshare --net --mount")
    ns = Namespace(tmp_path_factory.mktemp("netns"), nss_build.dir, RESOLV_CONF, HOSTS,
                   f"passwd: files\ngroup: files\nhosts: {HOSTS_LINE}\n")
    try:
        yield ns
    finally:
        ns.stop()


@pytest.fixture(scope="session")
def dns_nsd(netns, tmp_path_factory):
    if not os.path.exists(NSD_BIN):
        pytest.skip("nsd is not installed")
    nsd = NsdInNamespace(netns, tmp_path_factory.mktemp("dns-nsd"), {"example.test": DNS_ZONE})
    if not nsd.wait_answering("www.example.test"):
        pytest.fail(f"NSD in the test namespace did not answer:\n{nsd.log_text()}")
    return nsd


@pytest.fixture
def fake_nss(netns, tmp_path):
    fake = FakeNssDaemon(tmp_path)
    saved = dict(netns.env)
    netns.env.update(NSCACHE_NSS_SOCKET=fake.sock_path)
    try:
        yield fake
    finally:
        netns.env.clear()
        netns.env.update(saved)
        fake.stop()


def nscache_has_nss(binary):
    r = subprocess.run([binary, "--help"], capture_output=True, text=True, timeout=10)
    return "--nss-socket" in (r.stdout + r.stderr)


class NssDaemon:
    def __init__(self, daemon, upstream, socket_path):
        self.daemon, self.upstream = daemon, upstream
        self.socket_path = socket_path

    def stats(self):
        return self.daemon.stats()


@pytest.fixture
def nss_daemon(nscache, daemon, fake_upstream, netns, tmp_path):
    """Factory: nss_daemon(extra_args=(), records=UPSTREAM_RECORDS, same_paths_as=None) -> NssDaemon."""
    if not nscache_has_nss(nscache):
        pytest.skip("this nscache has no --nss-socket (daemon side not built)")
    saved = dict(netns.env)
    started = []

    def start(extra_args=(), records=UPSTREAM_RECORDS, threads=2, same_paths_as=None):
        if not started:
            for name, rtype, ttl, rdatas in records:
                fake_upstream.add(name, rtype, ttl, *rdatas)
        started.append(True)
        n = len(started)
        sock = tmp_path / f"nss{n}.sock"
        if same_paths_as is not None:  # a restart: the module must find the new map
            sock = same_paths_as.socket_path
        # The records use documentation addresses (192.0.2.0/24, 2001:db8::/32), whose reverse
        # zones nscache would otherwise answer NXDOMAIN itself (RFC 6303).
        d = daemon([fake_upstream.addr], threads=threads, config="forward-private-zones = true\n",
                   extra_args=["--nss-socket", str(sock), *extra_args])
        netns.env.update(NSCACHE_NSS_SOCKET=str(sock))
        return NssDaemon(d, fake_upstream, sock)

    try:
        yield start
    finally:
        netns.env.clear()
        netns.env.update(saved)
