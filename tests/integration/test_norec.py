# SPDX-License-Identifier: BSD-3-Clause
"""Queries without RD (RFC 1034 §4.3.1) are answered from the cache only, never forwarded;
only clients in `allow-snoop` (default loopback) may read the cache that way."""

import dns.edns
import dns.flags
import dns.message
import dns.rcode

from dnshelpers import a_addrs, make_query, tcp, udp


def ede_codes(r):
    return [o.code for o in r.options if isinstance(o, dns.edns.EDEOption)]


def norec(name, rdtype="A"):
    return make_query(name, rdtype, payload=1232, rd=False)


def test_norec_is_answered_from_the_cache_and_never_forwarded(daemon, fake_upstream):
    fake_upstream.add("held.fake.test.", "A", 300, "192.0.2.70")
    fake_upstream.add("notheld.fake.test.", "A", 300, "192.0.2.71")
    d = daemon(fake_upstream.addr)
    r = udp(d.port, None, query=norec("notheld.fake.test"))
    assert r.rcode() == dns.rcode.REFUSED and not r.answer
    assert ede_codes(r) == [20], "a miss without RD says Not Authoritative (RFC 8914)"
    assert a_addrs(udp(d.port, "held.fake.test")) == ["192.0.2.70"]  # with RD: cached
    for ask in (udp, tcp):
        r = ask(d.port, None, query=norec("held.fake.test"))
        assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.70"]
        assert not r.flags & dns.flags.RD
    assert fake_upstream.count(name="notheld.fake.test") == 0, "a query without RD went upstream"
    assert fake_upstream.count(name="held.fake.test") == 1


def test_norec_from_a_client_outside_allow_snoop_is_refused(daemon, fake_upstream):
    fake_upstream.add("snoop.fake.test.", "A", 300, "192.0.2.72")
    d = daemon(fake_upstream.addr, config='allow-snoop = ["127.0.0.2/32"]\n')
    assert a_addrs(udp(d.port, "snoop.fake.test", source="127.0.0.3")) == ["192.0.2.72"]
    r = udp(d.port, None, query=norec("snoop.fake.test"), source="127.0.0.3")
    assert r.rcode() == dns.rcode.REFUSED and not r.answer
    assert ede_codes(r) == [18]
    r = udp(d.port, None, query=norec("snoop.fake.test"), source="127.0.0.2")
    assert a_addrs(r) == ["192.0.2.72"]
    assert fake_upstream.count(name="snoop.fake.test") == 1


def test_norec_gets_local_answers(daemon, fake_upstream):
    d = daemon(fake_upstream.addr, config='allow-snoop = []\nchaos-version = "nscache-test"\n')
    for name, rdtype, rdclass in (("localhost", "A", "IN"), ("version.bind", "TXT", "CH")):
        q = dns.message.make_query(name, rdtype, rdclass, use_edns=0, payload=1232)
        q.flags &= ~dns.flags.RD
        r = udp(d.port, None, query=q)
        assert r.rcode() == dns.rcode.NOERROR and r.answer, (name, r)
    assert fake_upstream.count() == 0
