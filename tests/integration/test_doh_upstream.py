# SPDX-License-Identifier: BSD-3-Clause
"""DNS over HTTPS upstreams (RFC 8484, issue 21 item 3) against a real unbound serving DoH
(HTTP/2 over TLS, Debian's unbound is built with libnghttp2) on loopback with a certificate
from a CA this module makes: answers, authentication by name, address and SPKI pin, a wrong
name refused with nothing sent in cleartext, 100 concurrent misses as streams of one HTTP/2
connection, and a server restart mid-load that loses no answer. The faults a real server will
not make on demand (HTTP 429/503, GOAWAY) are in test_doh_upstream_faults.py."""

import base64
import os
import shutil
import signal
import socket
import subprocess
import time

import dns.rcode
import pytest

from dnshelpers import a_addrs, make_query, many_udp, udp, wait_until

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
NAMES = 200

pytestmark = pytest.mark.skipif(not os.path.exists(UNBOUND), reason="unbound is not installed")


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA, a server certificate for doh.test and 127.0.0.1, and its SPKI pin."""
    d = tmp_path_factory.mktemp("pki")
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=nscache DoH test CA",
       cwd=d)
    sh(OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=doh.test", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:doh.test,IP:127.0.0.1\n")
    sh(OPENSSL, "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
       "-CAcreateserial", "-out", "server.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    pub = subprocess.run([OPENSSL, "x509", "-in", d / "server.pem", "-pubkey", "-noout"],
                         check=True, capture_output=True).stdout
    der = subprocess.run([OPENSSL, "pkey", "-pubin", "-outform", "der"], input=pub, check=True,
                         capture_output=True).stdout
    digest = subprocess.run([OPENSSL, "dgst", "-sha256", "-binary"], input=der, check=True,
                            capture_output=True).stdout
    return {"dir": d, "ca": d / "ca.pem", "cert": d / "server.pem", "key": d / "server.key",
            "pin": base64.b64encode(digest).decode()}


def free_tcp_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def address_of(i):
    return f"192.0.2.{i % 250 + 1}"


class UnboundDoh:
    """unbound answering DNS over HTTPS (HTTP/2, POST and GET) on 127.0.0.1:port at `path`,
    from local data n0..n199.doh.test."""

    def __init__(self, pki, workdir, port, path="/dns-query"):
        self.port = port
        self.conf = workdir / "unbound.conf"
        data = "\n".join(f'  local-data: "n{i}.doh.test. 300 IN A {address_of(i)}"'
                         for i in range(NAMES))
        self.conf.write_text(f"""server:
  interface: 127.0.0.1@{port}
  https-port: {port}
  http-endpoint: "{path}"
  tls-service-key: "{pki['key']}"
  tls-service-pem: "{pki['cert']}"
  port: {port}
  do-ip6: no
  do-udp: no
  do-daemonize: no
  username: ""
  chroot: ""
  directory: "{workdir}"
  pidfile: ""
  use-syslog: no
  logfile: ""
  verbosity: 0
  num-threads: 1
  module-config: "iterator"
  access-control: 127.0.0.0/8 allow
  local-zone: "doh.test." static
{data}
remote-control:
  control-enable: no
""")
        self.proc = None

    def start(self):
        self.proc = subprocess.Popen([UNBOUND, "-d", "-c", str(self.conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     start_new_session=True)
        ok = wait_until(lambda: self._listening() or self.proc.poll() is not None, timeout=10)
        assert ok and self.proc.poll() is None, f"unbound did not start: {self.proc.stderr.read()}"
        return self

    def _listening(self):
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
            return True
        except OSError:
            return False

    def stop(self):
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


@pytest.fixture(scope="module")
def unbound(pki, tmp_path_factory):
    u = UnboundDoh(pki, tmp_path_factory.mktemp("unbound-doh"), free_tcp_port()).start()
    yield u
    u.stop()


def doh(server, name="doh.test", path=""):
    return f"https://127.0.0.1:{server.port}{path}" + (f"#{name}" if name else "")


def ca(pki):
    return f'tls-ca-file = "{pki["ca"]}"\n'


def expect_answers(port, indexes, timeout=8):
    """Asks n<i>.doh.test for each index at once; returns the names not answered right."""
    names = [f"n{i}.doh.test" for i in indexes]
    replies = many_udp(port, [make_query(n) for n in names], timeout=timeout)
    return [(n, r and dns.rcode.to_text(r.rcode()))
            for i, n, r in zip(indexes, names, replies)
            if r is None or a_addrs(r) != [address_of(i)]]


def test_answers_over_https(daemon, unbound, pki):
    d = daemon(doh(unbound), config=ca(pki), threads=1)
    assert a_addrs(udp(d.port, "n1.doh.test", timeout=5)) == [address_of(1)]
    missing = udp(d.port, "missing.doh.test", timeout=5)
    assert missing.rcode() == dns.rcode.NXDOMAIN
    s = d.stats()
    assert s["upstream_doh_streams"] == 2
    assert s["upstream_connections"] == 1 and s["upstream_tls_handshakes"] == 1
    assert s["upstream_doh_http_errors"] == 0 and s["upstream_tls_auth_failures"] == 0
    # Nothing went over UDP: a DoH upstream is asked over its HTTP/2 connection alone.
    assert s["upstream_sockets_opened"] == 0


def test_path_and_address_authentication(daemon, pki, tmp_path):
    """A path of the server's choosing, and no #NAME: the certificate must name the address."""
    u = UnboundDoh(pki, tmp_path, free_tcp_port(), path="/resolve").start()
    try:
        d = daemon(doh(u, name=None, path="/resolve"), config=ca(pki), threads=1)
        assert a_addrs(udp(d.port, "n2.doh.test", timeout=5)) == [address_of(2)]
        # The default path is not served there: unbound answers 404, a refusal.
        wrong = daemon(doh(u, name=None), config=ca(pki) + 'query-timeout = "1500ms"\n',
                       threads=1)
        r = udp(wrong.port, "n3.doh.test", timeout=5)
        assert r.rcode() == dns.rcode.SERVFAIL and not a_addrs(r)
        assert wrong.stats()["upstream_doh_http_errors"] >= 1
    finally:
        u.stop()


@pytest.mark.parametrize("auth", ["strict", "opportunistic-dead-server"])
def test_no_cleartext_fallback(daemon, unbound, pki, auth):
    """A wrong NAME is refused in strict mode; in no mode does a DoH upstream's query go out in
    cleartext (a DoH server has no cleartext twin), not even opportunistic mode's while the
    encrypted connection cannot be made."""
    if auth == "strict":
        d = daemon(doh(unbound, name="wrong.test"), threads=1,
                   config=ca(pki) + 'query-timeout = "1500ms"\n')
    else:
        d = daemon(f"https://127.0.0.1:{free_tcp_port()}#doh.test", threads=1,
                   config=ca(pki) + 'tls-auth = "opportunistic"\nquery-timeout = "1500ms"\n')
    r = udp(d.port, "n4.doh.test", timeout=5)
    assert r.rcode() == dns.rcode.SERVFAIL and not a_addrs(r)
    s = d.stats()
    assert s["upstream_sockets_opened"] == 0, "a query went out over UDP"
    assert s["upstream_doh_streams"] == 0, "a query went out on an unauthenticated connection"
    if auth == "strict":
        assert s["upstream_tls_auth_failures"] >= 1
    assert s["upstream_connect_failures"] >= 1


def test_spki_pin_is_enough_without_a_trusted_ca(daemon, unbound, pki):
    d = daemon(doh(unbound, "not-in-the-cert.test"), threads=1,
               config=f'tls-pin = ["127.0.0.1:{unbound.port} {pki["pin"]}"]\n')
    assert a_addrs(udp(d.port, "n5.doh.test", timeout=5)) == [address_of(5)]
    assert d.stats()["upstream_tls_auth_failures"] == 0


def test_forward_rule_over_https(daemon, unbound, pki, make_fake):
    """A [[forward]] may name https:// servers."""
    public = make_fake()
    d = daemon([], threads=1, config=f'upstream = ["{public.addr}"]\n' + ca(pki) +
               f'[[forward]]\ndomains = ["doh.test"]\nupstreams = ["{doh(unbound)}"]\n')
    assert a_addrs(udp(d.port, "n6.doh.test", timeout=5)) == [address_of(6)]
    assert d.stats()["upstream_doh_streams"] == 1


def test_concurrent_misses_share_one_http2_connection(daemon, unbound, pki):
    d = daemon(doh(unbound), threads=1, config=ca(pki) + 'query-timeout = "5s"\n')
    assert not expect_answers(d.port, range(100, 200)), "misses not answered"
    s = d.stats()
    assert s["upstream_doh_streams"] >= 100
    assert s["upstream_connections"] == 1, "the misses did not share one HTTP/2 connection"
    assert s["upstream_tls_handshakes"] == 1


def test_server_restart_mid_load_loses_no_answer(daemon, pki, tmp_path):
    u = UnboundDoh(pki, tmp_path, free_tcp_port()).start()
    try:
        d = daemon(doh(u), threads=1,
                   config=ca(pki) + 'query-timeout = "5s"\nserve-stale = false\n')
        failures = []
        for batch in range(4):
            if batch == 2:
                u.stop()
                u.start()  # the same port: the daemon's connection is gone
            failures += expect_answers(d.port, range(batch * 25, batch * 25 + 25))
        assert not failures, f"lost or wrong answers across the restart: {failures}"
        s = d.stats()
        assert s["upstream_tls_handshakes"] >= 2 and s["upstream_connections"] >= 2
    finally:
        u.stop()


def test_idle_close_then_resumed_session(daemon, unbound, pki):
    """The connection closes after upstream-idle-timeout with nothing outstanding; the next
    query opens a new one, resuming the TLS session."""
    d = daemon(doh(unbound), threads=1,
               config=ca(pki) + 'upstream-idle-timeout = "200ms"\n')
    assert a_addrs(udp(d.port, "n7.doh.test", timeout=5)) == [address_of(7)]
    assert wait_until(lambda: d.stats()["upstream_connections"] == 1, timeout=2)
    time.sleep(0.6)
    assert a_addrs(udp(d.port, "n8.doh.test", timeout=5)) == [address_of(8)]
    s = d.stats()
    assert s["upstream_connections"] == 2 and s["upstream_tls_handshakes"] == 2
    assert s["upstream_tls_resumed"] == 1
