"""Queries for type ANY get a minimal answer from nscache itself (RFC 8482): one synthesized
HINFO record, never forwarded and never cached."""

import dns.flags
import dns.rcode
import dns.rdataclass
import dns.rdatatype

from dnshelpers import make_query, tcp, udp


def assert_minimal_any(r, name):
    assert r.rcode() == dns.rcode.NOERROR
    assert r.flags & dns.flags.QR and r.flags & dns.flags.RA and not r.flags & dns.flags.TC
    assert len(r.answer) == 1, r
    rrset = r.answer[0]
    assert rrset.name.to_text().lower() == name.lower()
    assert rrset.rdtype == dns.rdatatype.HINFO and rrset.rdclass == dns.rdataclass.IN
    assert [(rd.cpu, rd.os) for rd in rrset] == [(b"RFC8482", b"")]
    assert not r.authority and not r.additional


def test_any_gets_a_synthesized_hinfo_and_is_not_forwarded(daemon, fake_upstream):
    fake_upstream.add("any.fake.test.", "A", 300, "192.0.2.90")
    fake_upstream.add("any.fake.test.", "TXT", 300, '"many records"')
    d = daemon(fake_upstream.addr)
    for _ in range(2):
        assert_minimal_any(udp(d.port, "Any.Fake.Test", "ANY"), "any.fake.test.")
    assert_minimal_any(tcp(d.port, "any.fake.test", "ANY"), "any.fake.test.")
    # With EDNS the answer carries our OPT, DO echoed.
    q = make_query("any.fake.test", "ANY", payload=4096)
    q.want_dnssec(True)
    r = udp(d.port, None, query=q)
    assert_minimal_any(r, "any.fake.test.")
    assert r.edns == 0 and r.ednsflags & dns.flags.DO
    assert fake_upstream.count(name="any.fake.test") == 0, "an ANY query went upstream"
    # Nothing was cached for the name: its A record is a miss that goes upstream.
    s0 = d.stats()
    assert [rd.address for rd in udp(d.port, "any.fake.test", "A").answer[0]] == ["192.0.2.90"]
    assert fake_upstream.count(name="any.fake.test") == 1
    assert d.stats()["cache_misses"] == s0["cache_misses"] + 1
