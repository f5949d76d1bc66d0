# SPDX-License-Identifier: BSD-3-Clause
"""Queries for type ANY are answered by nscache itself (RFC 8482): with the name's A and AAAA
RRsets (§4.1: a subset of its RRsets, what stubs such as c-ares' ares_query_any / Node's
dns.resolveAny() want), asked upstream as the A and AAAA questions and cached as those; one
synthesized HINFO (§4.2) only for a name with neither. ANY itself is never forwarded."""

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


def rrsets_of(r):
    return sorted((rr.name.to_text().lower(), dns.rdatatype.to_text(rr.rdtype),
                   sorted(rd.to_text() for rd in rr)) for rr in r.answer)


def upstream_types(fake, name):
    want = name.lower()
    return sorted(dns.rdatatype.to_text(q["rdtype"]) for q in fake.queries if q["name"] == want)


def test_any_gets_the_names_a_and_aaaa_rrsets(daemon, fake_upstream):
    fake_upstream.add("dual.fake.test.", "A", 300, "192.0.2.91", "192.0.2.92")
    fake_upstream.add("dual.fake.test.", "AAAA", 300, "2001:db8::91")
    fake_upstream.add("dual.fake.test.", "TXT", 300, '"not asked"')
    d = daemon(fake_upstream.addr)
    want = [("dual.fake.test.", "A", ["192.0.2.91", "192.0.2.92"]),
            ("dual.fake.test.", "AAAA", ["2001:db8::91"])]
    for ask in (udp, udp, tcp):  # the first asks upstream, the others are cache hits
        r = ask(d.port, "Dual.Fake.Test", "ANY")
        assert r.rcode() == dns.rcode.NOERROR and not r.flags & dns.flags.TC
        assert rrsets_of(r) == want, r
        assert r.question[0].rdtype == dns.rdatatype.ANY
    # ANY itself never went upstream: its A and AAAA questions did, once each, and are cached.
    assert upstream_types(fake_upstream, "dual.fake.test.") == ["A", "AAAA"]
    r = udp(d.port, "dual.fake.test", "AAAA")
    assert rrsets_of(r) == want[1:]
    assert fake_upstream.count(name="dual.fake.test") == 2
    # One of the two held: only the other is asked.
    fake_upstream.add("half.fake.test.", "A", 300, "192.0.2.93")
    assert rrsets_of(udp(d.port, "half.fake.test", "A")) == [("half.fake.test.", "A", ["192.0.2.93"])]
    assert rrsets_of(udp(d.port, "half.fake.test", "ANY")) == [("half.fake.test.", "A", ["192.0.2.93"])]
    assert upstream_types(fake_upstream, "half.fake.test.") == ["A", "AAAA"]


def test_any_for_a_name_without_addresses_gets_a_synthesized_hinfo(daemon, fake_upstream):
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
    assert "ANY" not in upstream_types(fake_upstream, "any.fake.test."), "ANY went upstream"
    # A name that does not exist: NXDOMAIN, as its A question said.
    r = udp(d.port, "nonesuch.fake.test", "ANY")
    assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer


def test_any_over_udp_keeps_to_the_clients_buffer(daemon, fake_upstream):
    addrs = [f"192.0.2.{i}" for i in range(1, 41)]
    fake_upstream.add("big.fake.test.", "A", 300, *addrs)
    fake_upstream.add("big.fake.test.", "AAAA", 300, *[f"2001:db8::{i:x}" for i in range(1, 21)])
    d = daemon(fake_upstream.addr)
    r = udp(d.port, "big.fake.test", "ANY")  # no EDNS: 512 bytes at most
    assert r.flags & dns.flags.TC and not r.answer
    r = tcp(d.port, "big.fake.test", "ANY")
    assert not r.flags & dns.flags.TC
    assert [len(rr) for rr in sorted(r.answer, key=lambda rr: rr.rdtype)] == [40, 20]


# Each half of an ANY goes the way its own A or AAAA question would. ANY once skipped the
# NXDOMAIN cut (2 upstream queries below a cached NXDOMAIN, A: 0) and the failure cache (8 per
# ANY to a dead upstream, again and again; A: 4 once).
def test_any_below_a_cached_nxdomain_is_answered_from_the_cut(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    assert udp(d.port, "gone.fake.test", "A").rcode() == dns.rcode.NXDOMAIN
    s0 = d.stats()
    r = udp(d.port, "x.gone.fake.test", "ANY")
    assert r.rcode() == dns.rcode.NXDOMAIN and not r.answer, r
    assert fake_upstream.count(name="x.gone.fake.test") == 0
    assert d.stats()["nxdomain_cut"] == s0["nxdomain_cut"] + 1


def test_any_for_a_question_that_just_failed_is_not_asked_again(daemon, fake_upstream):
    """RFC 9520 §3.2, as for its A and AAAA questions."""
    d = daemon(fake_upstream.addr, config='query-timeout = "1s"\nfailure-ttl = "30s"\n')
    fake_upstream.mode = "drop"
    assert udp(d.port, "dead.fake.test", "ANY", timeout=5).rcode() == dns.rcode.SERVFAIL
    first = fake_upstream.count(name="dead.fake.test")
    assert first > 0
    s1 = d.stats()
    for _ in range(2):
        assert udp(d.port, "dead.fake.test", "ANY").rcode() == dns.rcode.SERVFAIL
    assert fake_upstream.count(name="dead.fake.test") == first
    assert d.stats()["failure_cached"] > s1["failure_cached"]
