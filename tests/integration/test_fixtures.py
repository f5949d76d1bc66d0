# SPDX-License-Identifier: BSD-3-Clause
"""Self-tests of the test harness: NSD and the fake upstream, without nscache."""

import socket
import time

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import pytest

from harness import BULK_COUNT, ZONE, bulk_addr, big_txt_strings
from dnshelpers import a_addrs, make_query, run, soa_ttl, tcp, udp
from fakeupstream import FORGED_A


def dig(port, *args):
    r = run(["dig", "@127.0.0.1", "-p", str(port), "+time=2", "+tries=1"] + list(args), timeout=10)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


def test_nsd_answers_dig(nsd):
    out = dig(nsd.port, f"www.{ZONE}", "A", "+short")
    assert out.split() == ["192.0.2.1"]
    out = dig(nsd.port, f"dual.{ZONE}", "AAAA", "+short")
    assert out.split() == ["2001:db8::3"]
    out = dig(nsd.port, f"bulk{BULK_COUNT - 1}.{ZONE}", "A", "+short")
    assert out.split() == [bulk_addr(BULK_COUNT - 1)]


def test_nsd_negative_and_big(nsd):
    r = udp(nsd.port, f"nope.{ZONE}", "A")
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert soa_ttl(r) > 0
    r = udp(nsd.port, f"www.{ZONE}", "MX")
    assert r.rcode() == dns.rcode.NOERROR and not r.answer
    r = udp(nsd.port, f"big.{ZONE}", "TXT", payload=1232)
    assert r.flags & dns.flags.TC
    r = tcp(nsd.port, f"big.{ZONE}", "TXT")
    assert len(r.to_wire()) > 1232
    got = sorted(b"".join(rd.strings).decode() for rr in r.answer for rd in rr)
    assert got == sorted(big_txt_strings())
    out = run(["kdig", "@127.0.0.1", "-p", str(nsd.port), "+tcp", f"big.{ZONE}", "TXT"], timeout=10)
    assert out.returncode == 0 and "NOERROR" in out.stdout


def test_fake_normal_and_counts(fake_upstream):
    f = fake_upstream
    f.add("host.fake.test.", "A", 120, "192.0.2.77")
    r = udp(f.port, "HoSt.fake.test", "A")
    assert a_addrs(r) == ["192.0.2.77"]
    assert r.question[0].name.to_text() == "HoSt.fake.test."
    r = tcp(f.port, "host.fake.test", "A")
    assert a_addrs(r) == ["192.0.2.77"]
    assert f.udp_count == 1 and f.tcp_count == 1
    assert f.count(name="host.fake.test") == 2
    r = udp(f.port, "missing.fake.test", "A")
    assert r.rcode() == dns.rcode.NXDOMAIN and soa_ttl(r) == 600
    r = udp(f.port, "host.fake.test", "MX")
    assert r.rcode() == dns.rcode.NOERROR and not r.answer and r.authority


def test_fake_modes(fake_upstream):
    f = fake_upstream
    f.add("m.fake.test.", "A", 60, "192.0.2.5")
    f.mode = "servfail"
    assert udp(f.port, "m.fake.test").rcode() == dns.rcode.SERVFAIL
    f.mode = "tc"
    r = udp(f.port, "m.fake.test")
    assert r.flags & dns.flags.TC and not r.answer
    assert a_addrs(tcp(f.port, "m.fake.test")) == ["192.0.2.5"]
    f.mode = "drop"
    with pytest.raises(dns.exception.Timeout):
        udp(f.port, "m.fake.test", timeout=0.5)
    f.mode = "normal"
    f.delay_ms = 300
    t0 = time.monotonic()
    assert a_addrs(udp(f.port, "m.fake.test")) == ["192.0.2.5"]
    assert time.monotonic() - t0 >= 0.25


def test_fake_forgeries(fake_upstream):
    f = fake_upstream
    f.add("victim.fake.test.", "A", 60, "192.0.2.9")
    f.forge = ["wrong_id", "wrong_question", "wrong_qtype", "wrong_source"]
    q = make_query("victim.fake.test", "A")
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(2)
        s.sendto(q.to_wire(), ("127.0.0.1", f.port))
        got = []
        for _ in range(5):
            data, src = s.recvfrom(65535)
            got.append((dns.message.from_wire(data), src))
    forged, real = got[:4], got[4]
    assert [m.id == q.id for m, _ in forged] == [False, True, True, True]
    assert forged[1][0].question[0].name != q.question[0].name
    assert forged[2][0].question[0].rdtype == dns.rdatatype.AAAA
    assert forged[3][1][1] != f.port  # another source port
    assert all(a_addrs(m) == [FORGED_A] for m, _ in forged)
    assert real[0].id == q.id and a_addrs(real[0]) == ["192.0.2.9"] and real[1][1] == f.port
    f.forge_only = True
    f.forge = ["wrong_id"]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        s.settimeout(0.6)
        s.sendto(q.to_wire(), ("127.0.0.1", f.port))
        data, _ = s.recvfrom(65535)
        assert dns.message.from_wire(data).id != q.id
        with pytest.raises(socket.timeout):
            s.recvfrom(65535)


def test_fake_big_answer_truncates_over_udp(fake_upstream):
    f = fake_upstream
    f.add("big.fake.test.", "TXT", 60, *[f'"{s}"' for s in big_txt_strings()])
    r = udp(f.port, "big.fake.test", "TXT", payload=1232)
    assert r.flags & dns.flags.TC
    r = tcp(f.port, "big.fake.test", "TXT")
    assert len(r.answer[0]) == len(big_txt_strings())


def test_dead_upstream_is_silent(dead_upstream):
    d = dead_upstream()
    with pytest.raises(dns.exception.Timeout):
        udp(d.port, "x.fake.test", timeout=0.3)
