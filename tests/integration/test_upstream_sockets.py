# SPDX-License-Identifier: BSD-3-Clause
"""The upstream socket pool (issue 11): every query in flight has its own source port, ports
change over time, and a mismatched answer retires the socket it arrived on."""

import dns.rcode
import pytest

from dnshelpers import a_addrs, make_query, many_udp, udp


def udp_sources(fake, names):
    return [q["source"][1] for q in fake.queries if q["transport"] == "udp" and q["name"] in names]


def test_outstanding_queries_never_share_a_port(daemon, fake_upstream):
    names = [f"p{i}.fake.test." for i in range(40)]
    for i, name in enumerate(names):
        fake_upstream.add(name, "A", 300, f"192.0.2.{i + 1}")
    fake_upstream.delay_ms = 700  # every query is outstanding while the others go out
    d = daemon(fake_upstream.addr, config='query-timeout = "5s"\n', threads=1)
    replies = many_udp(d.port, [make_query(n) for n in names], timeout=8)
    assert all(r is not None and r.rcode() == dns.rcode.NOERROR for r in replies)
    with fake_upstream.lock:
        qs = [q for q in fake_upstream.queries if q["transport"] == "udp"]
    first = min(q["time"] for q in qs)
    # Everything sent before the first answer went out was outstanding at the same time.
    outstanding = [q["source"][1] for q in qs if q["time"] < first + 0.6]
    assert len(outstanding) >= 40
    assert len(set(outstanding)) == len(outstanding), f"ports shared: {sorted(outstanding)}"


def test_upstream_ports_change_over_time(daemon, fake_upstream):
    names = [f"t{i}.fake.test." for i in range(30)]
    for name in names:
        fake_upstream.add(name, "A", 300, "192.0.2.9")
    # Two idle sockets, three queries each: 30 answered queries one after the other need
    # about ten sockets, each on a fresh port.
    d = daemon(fake_upstream.addr, config="upstream-sockets = 2\nupstream-socket-uses = 3\n",
               threads=1)
    for name in names:
        assert a_addrs(udp(d.port, name)) == ["192.0.2.9"]
    ports = udp_sources(fake_upstream, set(names))
    assert len(set(ports)) >= 8, f"ports did not change: {ports}"
    assert d.stats()["upstream_sockets_opened"] >= 10


@pytest.mark.parametrize("kind", ["wrong_id", "wrong_source"])
def test_mismatched_answer_retires_its_socket(daemon, fake_upstream, kind):
    """Right port and wrong ID, or right ID from the wrong port: dropped, counted, and the
    port is never used again (one idle socket: without the retirement it would be reused)."""
    fake_upstream.add("forged.fake.test.", "A", 300, "192.0.2.70")
    for i in range(5):
        fake_upstream.add(f"after{i}.fake.test.", "A", 300, "192.0.2.71")
    d = daemon(fake_upstream.addr, config="upstream-sockets = 1\n", threads=1)
    assert a_addrs(udp(d.port, "after0.fake.test")) == ["192.0.2.71"]
    fake_upstream.forge = [kind]
    fake_upstream.forge_gap_ms = 10  # the real answer before any retry
    assert a_addrs(udp(d.port, "forged.fake.test", timeout=5)) == ["192.0.2.70"]
    fake_upstream.forge = []
    forged_port = udp_sources(fake_upstream, {"forged.fake.test."})[0]
    s = d.stats()
    assert s["dropped_mismatched"] >= 1
    assert s["upstream_sockets_spoofed"] == 1
    for i in range(1, 5):
        assert a_addrs(udp(d.port, f"after{i}.fake.test")) == ["192.0.2.71"]
    later = udp_sources(fake_upstream, {f"after{i}.fake.test." for i in range(1, 5)})
    assert forged_port not in later, f"port {forged_port} used again after a {kind} forgery"
    # The quiet socket before it was reused (one idle socket, answered queries).
    [first_port] = udp_sources(fake_upstream, {"after0.fake.test."})
    assert first_port == forged_port
