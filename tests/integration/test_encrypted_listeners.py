# SPDX-License-Identifier: BSD-3-Clause
"""DNS over TLS (RFC 7858) and DNS over HTTPS (RFC 8484) served by nscache (issue 21), with a
CA and server certificates this module makes: kdig, dig and curl answered; 50 queries
pipelined on one TLS connection; a UDP-cached name is a hit over DoT and DoH; padding;
session resumption; a certificate replaced and SIGHUP; a client outside `allow`; a stalled
handshake; the DoH error statuses, cache-control, ID 0; an HTTP/2 rapid-reset flood."""

import base64
import re
import shutil
import socket
import ssl
import struct
import subprocess
import time

import dns.message
import dns.rcode
import pytest

from dnshelpers import a_addrs, make_query, udp, wait_until
from harness import ZONE

OPENSSL = shutil.which("openssl") or "/usr/bin/openssl"
KDIG = shutil.which("kdig")
DIG = shutil.which("dig")
CURL = shutil.which("curl")
ENCRYPTED_RE = re.compile(r"listening on tcp 127\.0\.0\.1:(\d+) \(DNS over (TLS|HTTPS)\)")


def sh(*args, cwd):
    subprocess.run(args, cwd=cwd, check=True, capture_output=True, timeout=30)


def make_server_cert(d, name, ca="ca"):
    sh(OPENSSL, "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", "/CN=dns.test", cwd=d)
    (d / "ext.cnf").write_text("subjectAltName=DNS:dns.test,IP:127.0.0.1\n")
    sh(OPENSSL, "x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
       "-CAcreateserial", "-out", f"{name}.pem", "-days", "2", "-extfile", "ext.cnf", cwd=d)
    (d / f"{name}.key").chmod(0o600)


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    sh(OPENSSL, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=nscache test CA", cwd=d)
    make_server_cert(d, "server")
    make_server_cert(d, "renewed")
    return d


def start(daemon, nsd, pki, tmp_path, extra=""):
    cert = tmp_path / "cert.pem"
    key = tmp_path / "key.pem"
    shutil.copy(pki / "server.pem", cert)
    shutil.copy(pki / "server.key", key)
    key.chmod(0o600)
    config = (f'listen-tls = ["127.0.0.1:0"]\nlisten-https = ["127.0.0.1:0"]\n'
              f'tls-certificate = "{cert}"\ntls-private-key = "{key}"\n{extra}')
    d = daemon([nsd.addr], config=config, threads=1)
    ports = {}
    assert wait_until(lambda: len(ENCRYPTED_RE.findall(d.stderr_text())) >= 2, 5)
    for port, kind in ENCRYPTED_RE.findall(d.stderr_text()):
        ports[kind] = int(port)
    d.dot_port, d.doh_port, d.cert, d.key = ports["TLS"], ports["HTTPS"], cert, key
    d.tls_context = client_context(pki)  # one context: a session resumes only within it
    return d


def client_context(pki):
    ctx = ssl.create_default_context(cafile=str(pki / "ca.pem"))
    ctx.check_hostname = True
    return ctx


def dot_connect(d, pki, session=None):
    raw = socket.create_connection(("127.0.0.1", d.dot_port), timeout=5)
    return d.tls_context.wrap_socket(raw, server_hostname="dns.test", session=session)


def dot_exchange(conn, msg):
    wire = msg.to_wire()
    conn.sendall(struct.pack("!H", len(wire)) + wire)
    return dns.message.from_wire(read_frame(conn))


def read_exact(conn, n):
    buf = b""
    while len(buf) < n:
        chunk = conn.recv(n - len(buf))
        if not chunk:
            raise ConnectionError("closed")
        buf += chunk
    return buf


def read_frame(conn):
    (length,) = struct.unpack("!H", read_exact(conn, 2))
    return read_exact(conn, length)


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def curl(d, pki, *args):
    cmd = [CURL, "-s", "--http2", "--cacert", str(pki / "ca.pem"), "--resolve",
           f"dns.test:{d.doh_port}:127.0.0.1", "--max-time", "10", *args]
    return subprocess.run(cmd, capture_output=True, timeout=20)


def doh_url(d, path="/dns-query"):
    return f"https://dns.test:{d.doh_port}{path}"


@pytest.mark.skipif(KDIG is None or DIG is None, reason="kdig and dig are needed")
def test_dot_kdig_and_dig_answered_and_padded(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    out = subprocess.run([KDIG, f"@127.0.0.1", "-p", str(d.dot_port), "+tls-ca=" + str(pki / "ca.pem"),
                          "+tls-hostname=dns.test", "+padding", f"www.{ZONE}", "A"],
                         capture_output=True, text=True, timeout=20).stdout
    assert "192.0.2.1" in out and "PADDING" in out, out
    out = subprocess.run([DIG, "@127.0.0.1", "-p", str(d.dot_port), "+tls", "+short",
                          f"www.{ZONE}", "A"], capture_output=True, text=True, timeout=20).stdout
    assert out.split() == ["192.0.2.1"], out
    s = d.stats()
    assert s["queries_tls"] >= 2 and s["dot_handshakes"] >= 2


def test_dot_fifty_pipelined_on_one_connection_and_udp_cache_hit(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    assert addrs(udp(d.port, f"multi.{ZONE}")) == {"192.0.2.11", "192.0.2.12", "192.0.2.13"}
    hits = d.stats()["cache_hits"]
    with dot_connect(d, pki) as conn:
        # The cached name first, alone: a hit, with no upstream query.
        r = dot_exchange(conn, make_query(f"multi.{ZONE}", qid=7))
        assert r.id == 7 and addrs(r) == {"192.0.2.11", "192.0.2.12", "192.0.2.13"}
        assert d.stats()["cache_hits"] == hits + 1
        wire = b""
        for i in range(50):
            q = make_query(f"bulk{i % 20}.{ZONE}" if i % 2 else f"www.{ZONE}", qid=1000 + i)
            w = q.to_wire()
            wire += struct.pack("!H", len(w)) + w
        conn.sendall(wire)
        ids = set()
        for _ in range(50):
            r = dns.message.from_wire(read_frame(conn))
            assert r.rcode() in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN)
            ids.add(r.id)
        assert ids == set(range(1000, 1050))
    assert d.stats()["dot_connections"] == 1


def test_dot_session_resumption(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    with dot_connect(d, pki) as conn:
        dot_exchange(conn, make_query(f"www.{ZONE}"))
        session = conn.session
    with dot_connect(d, pki, session=session) as conn:
        dot_exchange(conn, make_query(f"www.{ZONE}"))
        assert conn.session_reused
    assert d.stats()["dot_resumed"] >= 1


def addrs(msg):
    return set(a_addrs(msg))


def cert_of(conn):
    return conn.getpeercert(binary_form=True)


def test_certificate_replaced_and_sighup(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    old = dot_connect(d, pki)
    before = cert_of(old)
    shutil.copy(pki / "renewed.pem", d.cert)
    shutil.copy(pki / "renewed.key", d.key)
    out = d.cli("reload", "--control", d.control)
    assert out.returncode == 0, out.stderr
    with dot_connect(d, pki) as conn:
        assert cert_of(conn) != before
        assert addrs(dot_exchange(conn, make_query(f"www.{ZONE}"))) == {"192.0.2.1"}
    # The connection opened before the reload goes on with its own.
    assert addrs(dot_exchange(old, make_query(f"www.{ZONE}"))) == {"192.0.2.1"}
    old.close()
    r = curl(d, pki, "-o", "/dev/null", "-w", "%{http_code}",
             doh_url(d) + "?dns=" + b64url(make_query(f"www.{ZONE}", qid=0).to_wire()))
    assert r.stdout == b"200"


def test_bad_certificate_on_reload_is_refused_and_old_kept(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    d.key.write_text("not a key\n")
    out = d.cli("reload", "--control", d.control)
    assert out.returncode != 0
    assert "tls-private-key" in out.stdout + out.stderr
    with dot_connect(d, pki) as conn:
        assert addrs(dot_exchange(conn, make_query(f"www.{ZONE}"))) == {"192.0.2.1"}


def test_bad_certificate_at_start_is_an_error(daemon, nsd, pki, tmp_path):
    config = (f'listen-tls = ["127.0.0.1:0"]\ntls-certificate = "{pki / "server.pem"}"\n'
              f'tls-private-key = "{tmp_path / "missing.key"}"\n')
    d = daemon([nsd.addr], config=config, threads=1, expect_ready=False)
    assert d.proc.wait(10) != 0
    assert "missing.key" in d.stderr_text()
    d2 = daemon([nsd.addr], config='listen-https = ["127.0.0.1:0"]\n', threads=1,
                expect_ready=False)
    assert d2.proc.wait(10) != 0
    assert "tls-certificate" in d2.stderr_text()


def test_client_outside_allow_refused(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path, extra='allow = ["10.0.0.0/8"]\n')
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        with dot_connect(d, pki) as conn:
            dot_exchange(conn, make_query(f"www.{ZONE}"))
    r = curl(d, pki, "-o", "/dev/null", "-w", "%{http_code}", doh_url(d) + "?dns=AAAA")
    assert r.stdout in (b"000", b"")
    assert wait_until(lambda: d.stats()["dot_rejected"] >= 1 and d.stats()["doh_rejected"] >= 1)


def test_stalled_handshake_closed_while_others_answered(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path, extra='tcp-read-timeout = "1s"\n')
    stalled = socket.create_connection(("127.0.0.1", d.dot_port), timeout=5)
    stalled.sendall(b"\x16\x03\x01")  # the start of a ClientHello, and nothing more
    with dot_connect(d, pki) as conn:
        assert addrs(dot_exchange(conn, make_query(f"www.{ZONE}"))) == {"192.0.2.1"}
    stalled.settimeout(8)
    assert stalled.recv(100) == b""  # closed by the daemon: the read timeout
    stalled.close()
    assert d.stats()["dot_handshake_failures"] >= 1


@pytest.mark.skipif(CURL is None, reason="curl is needed")
def test_doh_get_and_post_with_content_type_cache_control_and_id_zero(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    assert addrs(udp(d.port, f"www.{ZONE}")) == {"192.0.2.1"}
    hits = d.stats()["cache_hits"]
    query = make_query(f"www.{ZONE}", qid=0).to_wire()
    body = tmp_path / "answer.bin"
    r = curl(d, pki, "-D", "-", "-o", str(body), doh_url(d) + "?dns=" + b64url(query))
    headers = r.stdout.decode().lower()
    assert headers.startswith("http/2 200"), headers
    assert "content-type: application/dns-message" in headers
    m = re.search(r"cache-control: max-age=(\d+)", headers)
    assert m and 0 < int(m.group(1)) <= 300
    answer = dns.message.from_wire(body.read_bytes())
    assert answer.id == 0 and addrs(answer) == {"192.0.2.1"}
    assert d.stats()["cache_hits"] == hits + 1  # cached through UDP, a hit through DoH
    post = subprocess.run([CURL, "-s", "--http2", "--cacert", str(pki / "ca.pem"), "--resolve",
                           f"dns.test:{d.doh_port}:127.0.0.1", "-H",
                           "content-type: application/dns-message", "--data-binary", "@-",
                           "-o", str(body), "-w", "%{http_code}", doh_url(d)],
                          input=query, capture_output=True, timeout=20)
    assert post.stdout == b"200"
    assert addrs(dns.message.from_wire(body.read_bytes())) == {"192.0.2.1"}
    assert d.stats()["queries_https"] >= 2


@pytest.mark.skipif(KDIG is None or DIG is None, reason="kdig and dig are needed")
def test_doh_kdig_and_dig(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    for method in ("+https", "+https-get"):
        out = subprocess.run([KDIG, "@127.0.0.1", "-p", str(d.doh_port), method,
                              "+tls-ca=" + str(pki / "ca.pem"), "+tls-hostname=dns.test",
                              f"www.{ZONE}", "A"], capture_output=True, text=True,
                             timeout=20).stdout
        assert "192.0.2.1" in out, (method, out)
    out = subprocess.run([DIG, "@127.0.0.1", "-p", str(d.doh_port), "+https", "+short",
                          f"www.{ZONE}", "A"], capture_output=True, text=True, timeout=20).stdout
    assert out.split() == ["192.0.2.1"], out


@pytest.mark.skipif(CURL is None, reason="curl is needed")
def test_doh_error_statuses(daemon, nsd, pki, tmp_path):
    d = start(daemon, nsd, pki, tmp_path)
    query = make_query(f"www.{ZONE}").to_wire()

    def status(*args):
        return curl(d, pki, "-o", "/dev/null", "-w", "%{http_code}", *args).stdout.decode()

    assert status(doh_url(d, "/other") + "?dns=" + b64url(query)) == "404"
    assert status("-X", "PUT", doh_url(d)) == "405"
    assert status("-H", "content-type: text/plain", "--data-binary", "x" * 20, doh_url(d)) == "415"
    assert status(doh_url(d) + "?dns=" + b64url(b"short")) == "400"
    assert status(doh_url(d) + "?dns=%%%") == "400"
    big = tmp_path / "big.bin"
    big.write_bytes(b"\0" * 70000)
    assert status("-H", "content-type: application/dns-message", "--data-binary", f"@{big}",
                  doh_url(d)) == "413"
    assert status("--http1.1", doh_url(d) + "?dns=" + b64url(query)) == "505"
    s = d.stats()
    assert s["doh_status_404"] >= 1 and s["doh_status_405"] >= 1 and s["doh_status_415"] >= 1
    assert s["doh_status_400"] >= 2 and s["doh_status_413"] >= 1


def test_doh_rapid_reset_flood_closed_others_answered(daemon, nsd, pki, tmp_path):
    h2 = pytest.importorskip("h2.connection")
    import h2.config
    d = start(daemon, nsd, pki, tmp_path)
    ctx = client_context(pki)
    ctx.set_alpn_protocols(["h2"])
    raw = socket.create_connection(("127.0.0.1", d.doh_port), timeout=5)
    conn = ctx.wrap_socket(raw, server_hostname="dns.test")
    c = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True))
    c.initiate_connection()
    conn.sendall(c.data_to_send())
    query = b64url(make_query(f"www.{ZONE}", qid=0).to_wire())
    headers = [(":method", "GET"), (":scheme", "https"), (":authority", "dns.test"),
               (":path", "/dns-query?dns=" + query)]
    closed = False
    try:
        for _ in range(2000):  # bounded: a server that never pushes back fails the test
            sid = c.get_next_available_stream_id()
            c.send_headers(sid, headers, end_stream=True)
            c.reset_stream(sid)
            conn.sendall(c.data_to_send())
    except (ssl.SSLError, OSError, h2.exceptions.ProtocolError):
        closed = True
    if not closed:
        conn.settimeout(5)
        try:
            while conn.recv(65536):
                pass
            closed = True
        except (ssl.SSLError, OSError):
            closed = True
    assert closed
    conn.close()
    r = curl(d, pki, "-o", "/dev/null", "-w", "%{http_code}", doh_url(d) + "?dns=" + query)
    assert r.stdout == b"200"
    assert d.stats()["doh_abuse_closed"] >= 1
