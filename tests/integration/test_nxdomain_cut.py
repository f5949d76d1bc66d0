# SPDX-License-Identifier: BSD-3-Clause
"""NXDOMAIN cut (RFC 8020): below a cached NXDOMAIN nothing exists, so names under it are
answered NXDOMAIN from the cache without an upstream query (a random-subdomain flood under
a missing name costs the upstream one query), within the name's own forwarding rule only."""

import dns.rcode
import dns.rdatatype

from dnshelpers import a_addrs, make_query, udp


def test_names_below_a_cached_nxdomain_are_answered_without_upstream(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    r = udp(d.port, "gone.fake.test", "A")
    assert r.rcode() == dns.rcode.NXDOMAIN
    s0 = d.stats()
    names = [f"rnd{i}.gone.fake.test" for i in range(20)] + ["a.b.c.Gone.Fake.Test"]
    for name in names:
        r = udp(d.port, name, "AAAA")
        assert r.rcode() == dns.rcode.NXDOMAIN, name
        assert not r.answer
        soa = [rr for rr in r.authority if rr.rdtype == dns.rdatatype.SOA]
        assert soa and soa[0].name.to_text().lower() == "fake.test.", r  # the zone's SOA
        assert 0 < soa[0].ttl <= 600
    for name in names:
        assert fake_upstream.count(name=name) == 0, f"{name} went upstream"
    assert d.stats()["nxdomain_cut"] == s0["nxdomain_cut"] + len(names)
    # NODATA is no cut: the name exists.
    fake_upstream.add("here.fake.test.", "TXT", 300, '"x"')
    fake_upstream.add("sub.here.fake.test.", "A", 300, "192.0.2.60")
    assert udp(d.port, "here.fake.test", "A").rcode() == dns.rcode.NOERROR
    assert a_addrs(udp(d.port, "sub.here.fake.test", "A")) == ["192.0.2.60"]
    # DNSSEC clients need the upstream's denial proofs: asked upstream.
    q = make_query("dnssec.gone.fake.test", "A", payload=1232)
    q.want_dnssec(True)
    udp(d.port, None, query=q)
    assert fake_upstream.count(name="dnssec.gone.fake.test") == 1


def test_no_cut_across_a_forwarding_rule(daemon, fake_upstream, make_fake):
    inner = make_fake()
    inner.add("host.lan.gone.fake.test.", "A", 300, "192.0.2.61")
    d = daemon(fake_upstream.addr,
               config=f'[[forward]]\ndomains = ["lan.gone.fake.test"]\nupstreams = ["{inner.addr}"]\n')
    assert udp(d.port, "gone.fake.test", "A").rcode() == dns.rcode.NXDOMAIN
    # The default upstream says gone.fake.test does not exist; the rule's servers know better.
    assert a_addrs(udp(d.port, "host.lan.gone.fake.test", "A")) == ["192.0.2.61"]
    assert inner.count(name="host.lan.gone.fake.test") == 1


def test_type0_queries_cannot_plant_a_cut(daemon, fake_upstream):
    """Type 0 is the NXDOMAIN-cut marker's key and a reserved type (RFC 6895 §3.1): a client's
    TYPE0 query is answered FORMERR, never forwarded nor cached, so it cannot plant a marker
    that answers the names below (a NODATA once made every answer below it malformed, the
    apex's answer turned the whole zone into NXDOMAIN)."""
    fake_upstream.add("victim.fake.test.", "TXT", 300, '"exists"')
    fake_upstream.add("www.victim.fake.test.", "A", 300, "192.0.2.71")
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.72")
    d = daemon(fake_upstream.addr)
    type0 = {name: udp(d.port, name, "TYPE0") for name in ("victim.fake.test", "fake.test")}
    for name, addr in (("www.victim.fake.test", "192.0.2.71"), ("www.fake.test", "192.0.2.72")):
        r = udp(d.port, name, "A")
        assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == [addr], r
        assert fake_upstream.count(name=name) == 1
    assert d.stats()["nxdomain_cut"] == 0
    for name, r in type0.items():
        assert r.rcode() == dns.rcode.FORMERR, r
        assert r.question and r.question[0].rdtype == 0
        assert fake_upstream.count(name=name) == 0, f"{name} TYPE0 went upstream"
