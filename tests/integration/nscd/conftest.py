# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for the nscd front's tests: glibc's own nscd client against the real daemon.

- `nscd_ns` (module): private network + mount namespaces (nsenv.py) with their own /run (so
  /var/run/nscd is the test's), the test's resolv.conf (nameserver 127.0.0.1, search
  example.test), hosts and `hosts: files dns`.
- `ns_nsd` (module): NSD on 127.0.0.1:53 inside them, what `files dns` asks straight.
- `nscd_daemon`: factory for `nscache serve --nscd-socket /var/run/nscd/socket`, run in the
  namespaces' mount namespace (its socket and map are theirs) but the host's network, where
  its upstream, the parent conftest's fake upstream loaded with the same records as NSD,
  listens on loopback.
"""

import os
import sys
import subprocess
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "nss"))

from nsenv import Namespace, NsdInNamespace, NSD_BIN  # noqa: E402
from nsspaths import build_dir  # noqa: E402

from nscdenv import HOSTS, NSSWITCH, RECORDS, RESOLV_CONF, SOCKET, reverse_zone_text, zone_text  # noqa: E402


class Client:
    def __init__(self, ns, build):
        self.ns, self.bin = ns, str(build / "nss" / "nscd_client")

    def run(self, *args, timeout=30):
        return self.ns.run([self.bin, *args], timeout=timeout)

    def out(self, *args):
        r = self.run(*args)
        return r.returncode, r.stdout


@pytest.fixture(scope="module")
def nscd_ns(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.skip("needs root")
    build = build_dir()
    if not (build / "nss" / "nscd_client").exists():
        pytest.skip("nscd_client not built")
    ns = Namespace(tmp_path_factory.mktemp("nscdns"), build / "nss", RESOLV_CONF, HOSTS, NSSWITCH,
                   private_run=True)
    try:
        yield ns
    finally:
        ns.stop()


@pytest.fixture(scope="module")
def ns_nsd(nscd_ns, tmp_path_factory):
    if not os.path.exists(NSD_BIN):
        pytest.skip("nsd is not installed")
    nsd = NsdInNamespace(nscd_ns, tmp_path_factory.mktemp("nscd-nsd"),
                         {"example.test": zone_text(), "100.51.198.in-addr.arpa": reverse_zone_text()})
    if not nsd.wait_answering("www.example.test"):
        pytest.fail(f"NSD in the test namespace did not answer:\n{nsd.log_text()}")
    return nsd


@pytest.fixture
def client(nscd_ns):
    return Client(nscd_ns, build_dir())


@pytest.fixture
def nscd_daemon(daemon, fake_upstream, nscd_ns, ns_nsd):
    """Factory: nscd_daemon(config=None, extra_args=(), in_netns=False, prefix=()) -> Daemon (its
    upstream: fake_upstream with RECORDS; in_netns: NSD in the namespaces; prefix: a command
    that execs the daemon, such as prlimit)."""
    loaded = []

    def start(config=None, extra_args=(), in_netns=False, prefix=()):
        if not loaded:
            for name, rtype, ttl, rdatas in RECORDS:
                fake_upstream.add(name, rtype, ttl, *rdatas)
            loaded.append(True)
        if in_netns:
            # In the namespaces' network too (it sees their address changes), forwarding to
            # NSD there.
            return daemon(["127.0.0.1:53"], config=config, threads=1,
                          extra_args=["--nscd-socket", SOCKET, *extra_args],
                          wrapper=["nsenter", "-t", str(nscd_ns.pid), "--net", "--mount", "--", *prefix])
        return daemon([fake_upstream.addr], config=config, threads=1,
                      extra_args=["--nscd-socket", SOCKET, *extra_args],
                      wrapper=["nsenter", "-t", str(nscd_ns.pid), "--mount", "--", *prefix])

    return start
