# SPDX-License-Identifier: BSD-3-Clause
"""Resolution failures as RFC 9520 requires, one TTL per RRset (RFC 2181 §5.2), and Extended
DNS Errors (RFC 8914) on the answers nscache makes itself (issue 13)."""

import time

import dns.edns
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from harness import ZONE
from dnshelpers import a_addrs, wait_until

EDE = 15


def ask(port, name, rdtype="A", edns=True, timeout=8.0, cookie=False, source="127.0.0.1"):
    options = [dns.edns.GenericOption(10, b"12345678")] if cookie else []
    q = dns.message.make_query(name, rdtype, use_edns=0 if edns else False, payload=1232,
                               options=options)
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout, source=source)


def ede_codes(msg):
    return [o.code for o in msg.options if o.otype == EDE]


def upstream_queries(fake, name):
    return fake.count("udp", name)


def test_blackholed_name_gets_at_most_three_queries_per_upstream(daemon, fake_upstream):
    fake_upstream.mode = "drop"
    d = daemon(fake_upstream.addr, config='query-timeout = "3s"\n')
    r = ask(d.port, "hole.fake.test")
    assert r.rcode() == dns.rcode.SERVFAIL
    time.sleep(0.5)  # nothing more goes out after the answer
    assert upstream_queries(fake_upstream, "hole.fake.test") == 3
    assert ede_codes(r) == [22], "an upstream timeout says No Reachable Authority"


def test_failure_is_cached_then_asked_again_with_backoff(daemon, fake_upstream):
    fake_upstream.mode = "drop"
    d = daemon(fake_upstream.addr, config='query-timeout = "1s"\nfailure-ttl = "2s"\nfailure-ttl-max = "60s"\n')
    assert ask(d.port, "flaky.fake.test").rcode() == dns.rcode.SERVFAIL
    sent = upstream_queries(fake_upstream, "flaky.fake.test")
    # Within the failure-cache time: SERVFAIL from the failure cache, nothing upstream (so no
    # wait for the query timeout).
    for i in range(5):
        r = ask(d.port, "flaky.fake.test")
        assert r.rcode() == dns.rcode.SERVFAIL and ede_codes(r) == [22]
        assert d.stats()["failure_cached"] == i + 1, "each answer comes from the failure cache"
    assert upstream_queries(fake_upstream, "flaky.fake.test") == sent
    # After it, the upstream is asked again; it fails again: now held twice as long (4 s).
    time.sleep(2.2)
    assert ask(d.port, "flaky.fake.test").rcode() == dns.rcode.SERVFAIL
    assert upstream_queries(fake_upstream, "flaky.fake.test") > sent
    sent = upstream_queries(fake_upstream, "flaky.fake.test")
    time.sleep(2.3)  # past the first 2 s, within the doubled 4 s
    assert ask(d.port, "flaky.fake.test").rcode() == dns.rcode.SERVFAIL
    assert upstream_queries(fake_upstream, "flaky.fake.test") == sent, "no backoff"
    # The upstream comes back; once the hold ends the name resolves.
    fake_upstream.mode = "normal"
    fake_upstream.add("flaky.fake.test.", "A", 300, "192.0.2.9")
    assert wait_until(lambda: a_addrs(ask(d.port, "flaky.fake.test")) == ["192.0.2.9"], timeout=6)


def test_second_upstream_answers_when_the_first_is_unresponsive(daemon, make_fake):
    first, second = make_fake(), make_fake()
    first.mode = "drop"
    second.mode = "drop"
    d = daemon([first.addr, second.addr], config='query-timeout = "4s"\n')
    assert ask(d.port, "both.fake.test").rcode() == dns.rcode.SERVFAIL
    time.sleep(0.5)
    assert upstream_queries(first, "both.fake.test") <= 3
    assert upstream_queries(second, "both.fake.test") <= 3
    assert upstream_queries(first, "both.fake.test") + upstream_queries(second, "both.fake.test") >= 4
    second.mode = "normal"
    second.add("other.fake.test.", "A", 300, "192.0.2.10")
    r = ask(d.port, "other.fake.test")
    assert a_addrs(r) == ["192.0.2.10"]
    assert upstream_queries(first, "other.fake.test") <= 3


def test_mixed_ttls_in_one_rrset_become_the_lowest(daemon, fake_upstream):
    for ttl, addr in ((300, "192.0.2.21"), (100, "192.0.2.22"), (200, "192.0.2.23")):
        fake_upstream.add("mixed.fake.test.", "A", ttl, addr)
    d = daemon(fake_upstream.addr)
    forwarded = ask(d.port, "mixed.fake.test")
    assert sorted(a_addrs(forwarded)) == ["192.0.2.21", "192.0.2.22", "192.0.2.23"]
    assert {rr.ttl for rr in forwarded.answer} == {100}
    cached = ask(d.port, "mixed.fake.test")
    assert upstream_queries(fake_upstream, "mixed.fake.test") == 1
    ttls = {rr.ttl for rr in cached.answer}
    assert len(ttls) == 1 and ttls.pop() <= 100


def test_stale_answer_says_so(daemon, fake_upstream):
    fake_upstream.add("old.fake.test.", "A", 1, "192.0.2.30")
    d = daemon(fake_upstream.addr, config='stale-answer-timeout = "300ms"\n')
    assert a_addrs(ask(d.port, "old.fake.test")) == ["192.0.2.30"]
    fake_upstream.mode = "drop"
    time.sleep(1.2)
    r = ask(d.port, "old.fake.test")
    assert a_addrs(r) == ["192.0.2.30"] and ede_codes(r) == [3]


def test_refused_says_prohibited_when_it_fits(daemon, fake_upstream):
    d = daemon(fake_upstream.addr, config='allow = ["127.0.0.2/32"]\n')
    r = ask(d.port, "x.fake.test", cookie=True)  # from 127.0.0.1: not allowed
    assert r.rcode() == dns.rcode.REFUSED and ede_codes(r) == [18]
    bare = ask(d.port, "x.fake.test", edns=False)
    assert bare.rcode() == dns.rcode.REFUSED and bare.edns < 0 and not bare.options


def test_no_ede_without_edns(daemon, fake_upstream):
    fake_upstream.mode = "drop"
    d = daemon(fake_upstream.addr, config='query-timeout = "1s"\n')
    r = ask(d.port, "quiet.fake.test", edns=False)
    assert r.rcode() == dns.rcode.SERVFAIL and r.edns < 0 and not r.options


def test_upstreams_own_ede_goes_only_with_its_answer(daemon, fake_upstream):
    fake_upstream.mode = "servfail"
    fake_upstream.ede = 6  # DNSSEC Bogus
    d = daemon(fake_upstream.addr)
    r = ask(d.port, "bogus.fake.test")
    assert r.rcode() == dns.rcode.SERVFAIL and ede_codes(r) == [6]
    again = ask(d.port, "bogus.fake.test")  # the cached SERVFAIL carries it too
    assert again.rcode() == dns.rcode.SERVFAIL and ede_codes(again) == [6]
    # nscache's own failure for another name says 22, not the upstream's 6.
    fake_upstream.mode = "drop"
    own = ask(d.port, "timeout.fake.test")
    assert own.rcode() == dns.rcode.SERVFAIL and ede_codes(own) == [22]
