# SPDX-License-Identifier: BSD-3-Clause
"""Access control: clients outside `allow` get REFUSED; the list replaces the default."""

import dns.exception
import dns.message
import pytest
import dns.rcode

from dnshelpers import a_addrs, header, make_query, question_bytes, rcode_of, tcp, udp, udp_raw


def test_client_outside_allow_is_refused(daemon, fake_upstream):
    fake_upstream.add("acl.fake.test.", "A", 300, "192.0.2.80")
    d = daemon(fake_upstream.addr, config='allow = ["127.0.0.2/32"]\n')
    r = udp(d.port, "acl.fake.test", source="127.0.0.3")
    assert r.rcode() == dns.rcode.REFUSED
    assert not r.answer
    assert fake_upstream.count(name="acl.fake.test") == 0, "a refused query went upstream"
    r = udp(d.port, "acl.fake.test", source="127.0.0.2")
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.80"]
    # Now the answer is cached: a refused client still gets nothing from it.
    r = udp(d.port, "acl.fake.test", source="127.0.0.3")
    assert r.rcode() == dns.rcode.REFUSED and not r.answer
    # The list replaces the loopback default: 127.0.0.1 is outside it too.
    r = udp(d.port, "acl.fake.test", source="127.0.0.1")
    assert r.rcode() == dns.rcode.REFUSED and not r.answer
    assert d.stats()["answers_refused"] >= 3


def test_refused_echoes_id_and_question(daemon, fake_upstream):
    d = daemon(fake_upstream.addr, config='allow = ["127.0.0.2/32"]\n')
    w = make_query("MiXeD.Fake.Test", "A", qid=0x7777).to_wire()
    a = udp_raw(d.port, w, source="127.0.0.3", timeout=3)
    assert a is not None
    assert header(a)[0] == 0x7777 and rcode_of(a) == dns.rcode.REFUSED
    assert question_bytes(a) == question_bytes(w)


def test_disallowed_tcp_client_gets_nothing(daemon, fake_upstream):
    # Over TCP the access check runs at accept: a disallowed client is closed before it can
    # hold a connection slot or send a byte (REFUSED is for UDP).
    fake_upstream.add("acl.fake.test.", "A", 300, "192.0.2.80")
    d = daemon(fake_upstream.addr, config='allow = ["127.0.0.2/32"]\n')
    with pytest.raises((EOFError, ConnectionError, dns.exception.DNSException)):
        tcp(d.port, "acl.fake.test", source="127.0.0.3")
    assert fake_upstream.count() == 0
    r = tcp(d.port, "acl.fake.test", source="127.0.0.2")
    assert a_addrs(r) == ["192.0.2.80"]


def test_default_allows_all_loopback(daemon, fake_upstream):
    fake_upstream.add("lo.fake.test.", "A", 300, "192.0.2.81")
    d = daemon(fake_upstream.addr)
    for src in ("127.0.0.1", "127.0.0.3", "127.1.2.3"):
        r = udp(d.port, "lo.fake.test", source=src)
        assert a_addrs(r) == ["192.0.2.81"], src


def test_allow_prefix_and_ipv6(daemon, fake_upstream):
    fake_upstream.add("six.fake.test.", "A", 300, "192.0.2.82")
    d = daemon(fake_upstream.addr, config='allow = ["127.0.0.0/30", "::1/128"]\n',
               listen=("127.0.0.1:0", "[::1]:0"))
    assert udp(d.port, "six.fake.test", source="127.0.0.2").rcode() == dns.rcode.NOERROR
    assert udp(d.port, "six.fake.test", source="127.0.0.3").rcode() == dns.rcode.NOERROR
    assert udp(d.port, "six.fake.test", source="127.0.0.4").rcode() == dns.rcode.REFUSED
    port6 = d.listening[("udp", "::1")]
    assert a_addrs(udp(port6, "six.fake.test", host="::1")) == ["192.0.2.82"]
