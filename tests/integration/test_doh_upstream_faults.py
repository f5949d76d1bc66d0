# SPDX-License-Identifier: BSD-3-Clause
"""DNS over HTTPS upstreams against a python3-h2 fake server (dohserver.py) for what a real
server will not do on demand: HTTP 503 and 429 and GOAWAY are upstream failures that fail over
to the next upstream (RFC 8484 §4.2.1), and the requests themselves: POST, DNS ID 0,
application/dns-message, padded to a multiple of 128 octets (RFC 8467)."""

import dns.rcode
import pytest

from dnshelpers import a_addrs, udp, wait_until
from dohserver import FakeDohServer
from test_doh_upstream import pki  # noqa: F401 - the module's test CA fixture


@pytest.fixture
def fake_doh(pki):  # noqa: F811
    made = []

    def make(mode, status=503):
        f = FakeDohServer(str(pki["cert"]), str(pki["key"]), mode=mode, status=status).start()
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


def doh(server):
    return f"https://127.0.0.1:{server.port}#doh.test"


def ca(pki):  # noqa: F811
    return f'tls-ca-file = "{pki["ca"]}"\nquery-timeout = "3s"\n'


def test_requests_are_posts_with_id_0_and_padding(daemon, fake_doh, pki):  # noqa: F811
    server = fake_doh("answer")
    server.records["p1.doh.test."] = "192.0.2.77"
    d = daemon(doh(server), config=ca(pki), threads=1)
    assert a_addrs(udp(d.port, "p1.doh.test", timeout=5)) == ["192.0.2.77"]
    assert udp(d.port, "p2.doh.test", timeout=5).rcode() == dns.rcode.NXDOMAIN
    assert not server.errors, server.errors
    assert len(server.queries) == 2
    for qid, length, content_type in server.queries:
        assert qid == 0, "RFC 8484 §4.1: DNS ID 0 on the wire"
        assert content_type == b"application/dns-message"
        assert length % 128 == 0, f"query not padded (RFC 8467): {length} octets"
    assert server.connections == 1
    assert d.stats()["upstream_doh_streams"] == 2


@pytest.mark.parametrize("status", [503, 429])
def test_http_error_fails_over_to_the_next_upstream(daemon, fake_doh, fake_upstream, pki,
                                                    status):  # noqa: F811
    server = fake_doh("status", status=status)
    for i in range(6):
        fake_upstream.add(f"f{i}.doh.test.", "A", 300, "192.0.2.88")
    d = daemon([doh(server), fake_upstream.addr], config=ca(pki), threads=1)
    for i in range(6):
        r = udp(d.port, f"f{i}.doh.test", timeout=5)
        assert a_addrs(r) == ["192.0.2.88"], f"f{i}: {r}"
    # The DoH server was asked (the set tries both), and every one of its refusals failed over.
    assert server.requests >= 1
    s = d.stats()
    assert s["upstream_doh_http_errors"] == server.requests
    assert s["upstream_connections"] == 1, "an HTTP error is not a reason to reconnect"


def test_persistent_http_errors_mark_the_server_down(daemon, fake_doh, pki):  # noqa: F811
    """503 after 503 counts against the server's health as timeouts do: it is marked down (its
    probe, a DoH query too, gets 503 and leaves it down)."""
    server = fake_doh("status", status=503)
    d = daemon(doh(server), config=ca(pki), threads=1)
    for i in range(3):
        r = udp(d.port, f"down{i}.doh.test", timeout=5)
        assert r.rcode() == dns.rcode.SERVFAIL and not a_addrs(r)

    def entry():
        return next(u for u in d.stats()["upstreams"] if str(u["address"]).endswith(f":{server.port}"))

    assert wait_until(lambda: entry()["up"] is False, timeout=5), d.stats()["upstreams"]
    assert "marked down" in d.stderr_text()
    assert d.stats()["upstream_doh_http_errors"] == server.requests >= 3


def test_goaway_fails_over_after_one_retry_on_a_new_connection(daemon, fake_doh, fake_upstream,
                                                               pki):  # noqa: F811
    server = fake_doh("goaway")
    d = daemon([doh(server), fake_upstream.addr], config=ca(pki), threads=1)
    answered = 0
    for i in range(6):
        fake_upstream.add(f"g{i}.doh.test.", "A", 300, "192.0.2.99")
        r = udp(d.port, f"g{i}.doh.test", timeout=5)
        answered += a_addrs(r) == ["192.0.2.99"]
    assert answered == 6
    assert server.requests >= 1, "the DoH server was never asked"
    s = d.stats()
    assert s["upstream_doh_goaway"] >= 1
    # A stream the GOAWAY refused (last-stream-id 0) goes again once, on a fresh connection.
    assert server.connections >= 2 and s["upstream_connections"] >= 2
