# SPDX-License-Identifier: BSD-3-Clause
"""DNS over TLS upstreams (RFC 7858, issue 11) against a real unbound serving DoT on
loopback with a certificate from a CA this module makes: answers, authentication by name,
CA and SPKI pin in strict mode, opportunistic mode, session resumption, reconnection when the
server restarts, and pipelined queries answered out of order on one connection."""

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
from dotserver import ReversingDotServer

UNBOUND = shutil.which("unbound") or "/usr/sbin/unbound"
OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
NAMES = 80

pytestmark = pytest.mark.skipif(not os.path.exists(UNBOUND), reason="unbound is not installed")


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=30)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """A test CA and a server certificate for dns.test and 127.0.0.1, and the SPKI pin."""
    d = tmp_path_factory.mktemp("pki")
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=nscache test CA", cwd=d)
    sh(OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=dns.test", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:dns.test,IP:127.0.0.1\n")
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


class Unbound:
    """unbound answering DNS over TLS on 127.0.0.1:port from local data."""

    def __init__(self, pki, workdir, port):
        self.port = port
        self.conf = workdir / "unbound.conf"
        data = "\n".join(f'  local-data: "n{i}.dot.test. 300 IN A 192.0.2.{i % 250 + 1}"'
                         for i in range(NAMES))
        self.conf.write_text(f"""server:
  interface: 127.0.0.1@{port}
  tls-port: {port}
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
  local-zone: "dot.test." static
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
    u = Unbound(pki, tmp_path_factory.mktemp("unbound"), free_tcp_port()).start()
    yield u
    u.stop()


def dot(unbound, name="dns.test"):
    return f"tls://127.0.0.1:{unbound.port}" + (f"#{name}" if name else "")


def test_answers_over_tls(daemon, unbound, pki):
    d = daemon(dot(unbound), config=f'tls-ca-file = "{pki["ca"]}"\n', threads=1)
    assert a_addrs(udp(d.port, "n1.dot.test", timeout=5)) == ["192.0.2.2"]
    assert a_addrs(udp(d.port, "n2.dot.test", timeout=5)) == ["192.0.2.3"]
    s = d.stats()
    assert s["upstream_tls_handshakes"] == 1, "one connection carries both queries"
    assert s["upstream_tls_auth_failures"] == 0
    assert s["upstreams"][0]["queries"] >= 2


def test_certificate_names_the_address_when_no_name_is_given(daemon, unbound, pki):
    d = daemon(dot(unbound, name=None), config=f'tls-ca-file = "{pki["ca"]}"\n', threads=1)
    assert a_addrs(udp(d.port, "n3.dot.test", timeout=5)) == ["192.0.2.4"]


@pytest.mark.parametrize("case", ["wrong-name", "untrusted", "wrong-pin"])
def test_strict_mode_refuses_an_unauthenticated_server(daemon, unbound, pki, case):
    config = 'query-timeout = "1s"\nserve-stale = false\n'
    name = "dns.test"
    if case == "wrong-name":
        config += f'tls-ca-file = "{pki["ca"]}"\n'
        name = "other.test"
    elif case == "wrong-pin":
        config += f'tls-pin = ["127.0.0.1:{unbound.port} {base64.b64encode(bytes(32)).decode()}"]\n'
        config += f'tls-ca-file = "{pki["ca"]}"\n'  # the pin decides, not the CA
    d = daemon(dot(unbound, name), config=config, threads=1)
    r = udp(d.port, "n4.dot.test", timeout=5)
    assert r.rcode() == dns.rcode.SERVFAIL
    s = d.stats()
    assert s["upstream_tls_auth_failures"] >= 1
    assert s["upstream_tls_handshakes"] == 0


def test_spki_pin_is_enough_without_a_trusted_ca(daemon, unbound, pki):
    d = daemon(dot(unbound, "not-in-the-cert.test"),
               config=f'tls-pin = ["127.0.0.1:{unbound.port} {pki["pin"]}"]\n', threads=1)
    assert a_addrs(udp(d.port, "n5.dot.test", timeout=5)) == ["192.0.2.6"]
    assert d.stats()["upstream_tls_auth_failures"] == 0


def test_opportunistic_mode_uses_an_unauthenticated_server(daemon, unbound):
    d = daemon(dot(unbound), config='tls-auth = "opportunistic"\n', threads=1)
    assert a_addrs(udp(d.port, "n6.dot.test", timeout=5)) == ["192.0.2.7"]
    s = d.stats()
    assert s["upstream_tls_auth_failures"] == 1 and s["upstream_tls_handshakes"] == 1


def test_session_is_resumed_after_an_idle_close(daemon, unbound, pki):
    d = daemon(dot(unbound), threads=1,
               config=f'tls-ca-file = "{pki["ca"]}"\nupstream-idle-timeout = "200ms"\n')
    assert a_addrs(udp(d.port, "n7.dot.test", timeout=5)) == ["192.0.2.8"]
    time.sleep(0.5)  # the idle connection closes
    assert a_addrs(udp(d.port, "n8.dot.test", timeout=5)) == ["192.0.2.9"]
    s = d.stats()
    assert s["upstream_tls_handshakes"] == 2
    assert s["upstream_tls_resumed"] == 1


def test_server_restart_mid_load_loses_no_answer(daemon, pki, tmp_path):
    u = Unbound(pki, tmp_path, free_tcp_port()).start()
    try:
        d = daemon(dot(u), threads=1,
                   config=f'tls-ca-file = "{pki["ca"]}"\nquery-timeout = "5s"\nserve-stale = false\n')
        failures = []
        for batch in range(4):
            if batch == 2:
                u.stop()
                u.start()  # the same port: the daemon's connection is gone
            names = [f"n{i}.dot.test" for i in range(batch * 20, batch * 20 + 20)]
            replies = many_udp(d.port, [make_query(n) for n in names], timeout=8)
            for n, r in zip(names, replies):
                i = int(n.split(".")[0][1:])
                if r is None or a_addrs(r) != [f"192.0.2.{i % 250 + 1}"]:
                    failures.append((n, r and dns.rcode.to_text(r.rcode())))
        assert not failures, f"lost or wrong answers across the restart: {failures}"
        assert d.stats()["upstream_tls_handshakes"] >= 2
    finally:
        u.stop()


def test_pipelined_queries_answered_out_of_order(daemon, pki):
    server = ReversingDotServer(str(pki["cert"]), str(pki["key"]), batch=20).start()
    try:
        names = [f"r{i}.dot.test" for i in range(20)]
        for i, n in enumerate(names):
            server.records[n + "."] = f"192.0.2.{i + 1}"
        d = daemon(f"tls://127.0.0.1:{server.port}#dns.test", threads=1,
                   config=f'tls-ca-file = "{pki["ca"]}"\nquery-timeout = "5s"\n')
        replies = many_udp(d.port, [make_query(n) for n in names], timeout=8)
        got = [a_addrs(r) if r is not None else None for r in replies]
        assert got == [[f"192.0.2.{i + 1}"] for i in range(20)]
        assert server.connections == 1, "the queries were not pipelined on one connection"
        assert server.answered_order[:20] != sorted(server.answered_order[:20])
        assert not server.errors
        # RFC 8467 §4.1: every query padded to a multiple of 128 octets.
        assert server.query_sizes and all(n % 128 == 0 for n in server.query_sizes), server.query_sizes
    finally:
        server.stop()


def test_forward_rule_over_tls_follows_reloads(daemon, unbound, pki, make_fake, nscache):
    """A [[forward]] may name tls:// servers; a reload that adds a pin, drops the rule or brings
    it back keeps answering (connections to servers a reload dropped are closed, never reused
    for another server)."""
    public = make_fake()
    public.add("n10.dot.test.", "A", 300, "198.51.100.10")
    base = f'upstream = ["{public.addr}"]\ntls-ca-file = "{pki["ca"]}"\n'
    rule = f'\n[[forward]]\ndomains = ["dot.test"]\nupstreams = ["{dot(unbound)}"]\n'
    d = daemon([], config=base + rule, threads=1)
    assert a_addrs(udp(d.port, "n11.dot.test", timeout=5)) == ["192.0.2.12"]

    def reload_with(text):
        (d.workdir / "nscache.toml.new").write_text(text)
        os.rename(d.workdir / "nscache.toml.new", d.workdir / "nscache.toml")
        r = subprocess.run([nscache, "reload", "--control", d.control], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr

    reload_with(base + f'tls-pin = ["127.0.0.1:{unbound.port} {pki["pin"]}"]\n' + rule)
    assert a_addrs(udp(d.port, "n12.dot.test", timeout=5)) == ["192.0.2.13"]
    reload_with(base)  # the rule is gone: the public side answers dot.test
    assert a_addrs(udp(d.port, "n10.dot.test", timeout=5)) == ["198.51.100.10"]
    reload_with(base + rule)
    assert a_addrs(udp(d.port, "n13.dot.test", timeout=5)) == ["192.0.2.14"]
    assert d.stats()["upstream_tls_auth_failures"] == 0


def spki_pin(cert):
    pub = subprocess.run([OPENSSL, "x509", "-in", cert, "-pubkey", "-noout"], check=True,
                         capture_output=True).stdout
    der = subprocess.run([OPENSSL, "pkey", "-pubin", "-outform", "der"], input=pub, check=True,
                         capture_output=True).stdout
    digest = subprocess.run([OPENSSL, "dgst", "-sha256", "-binary"], input=der, check=True,
                            capture_output=True).stdout
    return base64.b64encode(digest).decode()


@pytest.fixture(scope="module")
def forged(pki):
    """What a man in the middle can make: keys of its own, a self-signed leaf for dns.test,
    and a leaf for dns.test from a CA of its own that bears the test CA's name. The genuine
    certificates are public, so it may send them along."""
    d = pki["dir"]
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "mitm.key", "-out", "mitm-self.pem", "-days", "2", "-subj", "/CN=dns.test",
       "-addext", "subjectAltName=DNS:dns.test,IP:127.0.0.1", cwd=d)
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "mitm-ca.key", "-out", "mitm-ca.pem", "-days", "2",
       "-subj", "/CN=nscache test CA", cwd=d)
    sh(OPENSSL, "req", "-new", "-key", "mitm.key", "-out", "mitm.csr", "-subj", "/CN=dns.test",
       cwd=d)
    sh(OPENSSL, "x509", "-req", "-in", "mitm.csr", "-CA", "mitm-ca.pem", "-CAkey", "mitm-ca.key",
       "-CAcreateserial", "-out", "mitm-issued.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    genuine = pki["cert"].read_text() + pki["ca"].read_text()
    chains = {
        # [own self-signed leaf, the genuine leaf, the genuine CA], signed with its own key
        "self-signed": (d / "mitm-self.pem").read_text() + genuine,
        # [own leaf from a CA named like the genuine one, the genuine leaf, the genuine CA]
        "same-name-ca": (d / "mitm-issued.pem").read_text() + genuine,
    }
    for name, text in chains.items():
        (d / f"chain-{name}.pem").write_text(text)
    (d / "chain-genuine.pem").write_text(genuine)
    return {"key": d / "mitm.key", "chain": lambda name: d / f"chain-{name}.pem",
            "ca_pin": spki_pin(pki["ca"])}


@pytest.mark.parametrize("pinned", ["leaf", "ca"])
@pytest.mark.parametrize("chain", ["self-signed", "same-name-ca"])
def test_pin_on_a_certificate_the_handshake_did_not_prove_is_refused(daemon, pki, forged, pinned,
                                                                     chain):
    """Issue 16 item 1: a pin matches the key of the leaf the handshake proved, or a CA the
    chain from that leaf verifies to, never any certificate sent along (RFC 7858 §4.2)."""
    server = ReversingDotServer(str(forged["chain"](chain)), str(forged["key"]), batch=1).start()
    try:
        server.records["forged.dot.test."] = "203.0.113.66"
        pin = pki["pin"] if pinned == "leaf" else forged["ca_pin"]
        d = daemon(f"tls://127.0.0.1:{server.port}#dns.test", threads=1,
                   config=f'tls-pin = ["127.0.0.1:{server.port} {pin}"]\n'
                          'query-timeout = "1s"\nserve-stale = false\n')
        r = udp(d.port, "forged.dot.test", timeout=5)
        assert a_addrs(r) == [] and r.rcode() == dns.rcode.SERVFAIL, "the forged answer was used"
        s = d.stats()
        assert s["upstream_tls_auth_failures"] >= 1
        assert s["upstream_tls_handshakes"] == 0
        assert "no certificate the server proved matches the pinned SPKI" in d.stderr_text()
    finally:
        server.stop()


@pytest.mark.parametrize("case", ["ca-sent", "ca-in-tls-ca-file"])
def test_pin_on_the_ca_of_the_verified_chain(daemon, pki, forged, unbound, case):
    """A pin on the CA: the server sends it along (no tls-ca-file: the chain is verified from
    the leaf against what it sent), or it is in tls-ca-file (unbound sends the leaf only)."""
    if case == "ca-sent":
        server = ReversingDotServer(str(forged["chain"]("genuine")), str(pki["key"]),
                                    batch=1).start()
        server.records["n20.dot.test."] = "192.0.2.21"
        port, config = server.port, ""
    else:
        server, port, config = None, unbound.port, f'tls-ca-file = "{pki["ca"]}"\n'
    try:
        # The name matches no certificate: the pin alone authenticates.
        d = daemon(f"tls://127.0.0.1:{port}#not-in-the-cert.test", threads=1,
                   config=config + f'tls-pin = ["127.0.0.1:{port} {forged["ca_pin"]}"]\n')
        assert a_addrs(udp(d.port, "n20.dot.test", timeout=5)) == ["192.0.2.21"]
        s = d.stats()
        assert s["upstream_tls_auth_failures"] == 0 and s["upstream_tls_handshakes"] == 1
    finally:
        if server is not None:
            server.stop()


def test_a_bad_tls_ca_file_is_an_error_at_start_without_any_tls_upstream(daemon, fake_upstream, tmp_path):
    """The system trust store waits for the first TLS connection when no tls:// upstream is
    configured; a tls-ca-file that cannot be read is still refused at start, not at first use."""
    bad = tmp_path / "not-a-ca.pem"
    bad.write_text("this is not a certificate\n")
    d = daemon(fake_upstream.addr, config=f'tls-ca-file = "{bad}"\n', expect_ready=False)
    d.proc.wait(timeout=10)
    d.stopped_by_test = True
    assert d.proc.returncode == 2, d.stderr_text()
    assert "tls-ca-file" in d.stderr_text(), d.stderr_text()
