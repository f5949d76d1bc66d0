# SPDX-License-Identifier: BSD-3-Clause
"""Caching behaviour: hits, TTL countdown, expiry, negative caching (RFC 2308), clamps,
serve-stale, memory budget."""

import random
import threading
import time

import dns.flags
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from harness import BULK_COUNT, LOWTTL_ZONE, ZONE, bulk_addr
from dnshelpers import a_addrs, aaaa_addrs, answer_ttl, make_query, many_udp, run, soa_ttl, tcp, udp, wait_until


@pytest.mark.threaded
def test_repeated_query_answered_from_cache(daemon, fake_upstream):
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    d = daemon(fake_upstream.addr)
    r1 = udp(d.port, "www.fake.test", "A")
    assert r1.rcode() == dns.rcode.NOERROR and a_addrs(r1) == ["192.0.2.10"]
    assert fake_upstream.count(name="www.fake.test") == 1
    before = d.stats()
    r2 = udp(d.port, "www.fake.test", "A")
    assert a_addrs(r2) == ["192.0.2.10"]
    after = d.stats()
    assert fake_upstream.count(name="www.fake.test") == 1, "second query went upstream"
    assert after["upstream_queries"] == before["upstream_queries"]
    assert after["cache_hits"] >= before["cache_hits"] + 1
    assert after["queries"] >= before["queries"] + 1


def test_repeated_query_via_nsd_uses_one_upstream_query(daemon, nsd):
    d = daemon(nsd.addr)
    r = run(["dig", "@127.0.0.1", "-p", str(d.port), f"www.{ZONE}", "A", "+short", "+time=3", "+tries=1"])
    assert r.returncode == 0 and r.stdout.split() == ["192.0.2.1"], r.stdout + r.stderr
    before = d.stats()["upstream_queries"]
    assert before >= 1
    for _ in range(3):
        r = run(["dig", "@127.0.0.1", "-p", str(d.port), f"www.{ZONE}", "A", "+short", "+time=3", "+tries=1"])
        assert r.stdout.split() == ["192.0.2.1"]
    assert d.stats()["upstream_queries"] == before


def test_cache_key_ignores_case(daemon, fake_upstream):
    fake_upstream.add("case.fake.test.", "A", 300, "192.0.2.20")
    d = daemon(fake_upstream.addr)
    assert a_addrs(udp(d.port, "case.fake.test")) == ["192.0.2.20"]
    assert a_addrs(udp(d.port, "CASE.Fake.TEST")) == ["192.0.2.20"]
    assert fake_upstream.count(name="case.fake.test") == 1


def test_types_are_cached_separately(daemon, nsd):
    d = daemon(nsd.addr)
    for _ in range(2):
        assert a_addrs(udp(d.port, f"dual.{ZONE}", "A")) == ["192.0.2.3"]
        assert aaaa_addrs(udp(d.port, f"dual.{ZONE}", "AAAA")) == ["2001:db8::3"]
        r = udp(d.port, f"v6only.{ZONE}", "AAAA")
        assert aaaa_addrs(r) == ["2001:db8::6"]
        r = udp(d.port, f"v6only.{ZONE}", "A")
        assert r.rcode() == dns.rcode.NOERROR and not r.answer
    r = udp(d.port, f"multi.{ZONE}", "A")
    assert a_addrs(r) == ["192.0.2.11", "192.0.2.12", "192.0.2.13"]


def test_cname_chain_is_answered_and_cached(daemon, nsd):
    d = daemon(nsd.addr)
    r1 = udp(d.port, f"alias.{ZONE}", "A")
    assert r1.rcode() == dns.rcode.NOERROR
    assert any(rr.rdtype == dns.rdatatype.CNAME for rr in r1.answer)
    assert a_addrs(r1) == ["192.0.2.1"]
    before = d.stats()["upstream_queries"]
    r2 = udp(d.port, f"alias.{ZONE}", "A")
    assert any(rr.rdtype == dns.rdatatype.CNAME for rr in r2.answer)
    assert a_addrs(r2) == ["192.0.2.1"]
    assert d.stats()["upstream_queries"] == before


def test_ttl_counts_down(daemon, nsd):
    d = daemon(nsd.addr)
    r1 = udp(d.port, f"www.{ZONE}", "A")
    t1 = answer_ttl(r1)
    assert 290 <= t1 <= 300
    before = d.stats()["upstream_queries"]
    time.sleep(2.2)
    r2 = udp(d.port, f"www.{ZONE}", "A")
    t2 = answer_ttl(r2)
    assert d.stats()["upstream_queries"] == before, "second query was not a cache hit"
    assert 1 <= t1 - t2 <= 4, f"TTL went from {t1} to {t2} over ~2.2 s"


def test_ttl_counts_down_fake(daemon, fake_upstream):
    fake_upstream.add("ttl.fake.test.", "A", 100, "192.0.2.21")
    d = daemon(fake_upstream.addr)
    t1 = answer_ttl(udp(d.port, "ttl.fake.test"))
    time.sleep(2.1)
    t2 = answer_ttl(udp(d.port, "ttl.fake.test"))
    assert fake_upstream.count(name="ttl.fake.test") == 1
    assert t1 <= 100 and 1 <= t1 - t2 <= 4


def test_expired_entry_is_fetched_again(daemon, fake_upstream):
    fake_upstream.add("short.fake.test.", "A", 2, "192.0.2.22")
    d = daemon(fake_upstream.addr)
    r1 = udp(d.port, "short.fake.test")
    assert a_addrs(r1) == ["192.0.2.22"] and answer_ttl(r1) <= 2
    assert fake_upstream.count(name="short.fake.test") == 1
    time.sleep(3.0)
    r2 = udp(d.port, "short.fake.test")
    assert a_addrs(r2) == ["192.0.2.22"]
    assert answer_ttl(r2) <= 2
    assert fake_upstream.count(name="short.fake.test") >= 2, "expired entry was served without refetch"


def test_expired_entry_is_fetched_again_nsd(daemon, nsd):
    d = daemon(nsd.addr)
    assert a_addrs(udp(d.port, f"short.{ZONE}")) == ["192.0.2.2"]
    before = d.stats()["upstream_queries"]
    time.sleep(3.0)
    r = udp(d.port, f"short.{ZONE}")
    assert a_addrs(r) == ["192.0.2.2"] and answer_ttl(r) <= 2
    assert d.stats()["upstream_queries"] > before


def test_nxdomain_cached_with_rfc2308_ttl(daemon, fake_upstream):
    # The fake upstream sends the SOA with TTL 600 and MINIMUM 60: the negative TTL is 60.
    d = daemon(fake_upstream.addr)
    r1 = udp(d.port, "nope.fake.test", "A")
    assert r1.rcode() == dns.rcode.NXDOMAIN
    assert fake_upstream.count(name="nope.fake.test") == 1
    r2 = udp(d.port, "nope.fake.test", "A")
    assert r2.rcode() == dns.rcode.NXDOMAIN
    assert fake_upstream.count(name="nope.fake.test") == 1, "NXDOMAIN was not cached"
    t = soa_ttl(r2)
    assert 50 <= t <= 60, f"cached NXDOMAIN carries SOA TTL {t}, want min(600, 60) = 60 counting down"


def test_nodata_cached_with_rfc2308_ttl(daemon, fake_upstream):
    fake_upstream.add("hasa.fake.test.", "A", 300, "192.0.2.23")
    d = daemon(fake_upstream.addr)
    r1 = udp(d.port, "hasa.fake.test", "MX")
    assert r1.rcode() == dns.rcode.NOERROR and not r1.answer
    r2 = udp(d.port, "hasa.fake.test", "MX")
    assert r2.rcode() == dns.rcode.NOERROR and not r2.answer
    assert fake_upstream.count(name="hasa.fake.test") == 1, "NODATA was not cached"
    t = soa_ttl(r2)
    assert 50 <= t <= 60, f"cached NODATA carries SOA TTL {t}, want 60"
    # The A record is a separate entry and still resolves.
    assert a_addrs(udp(d.port, "hasa.fake.test", "A")) == ["192.0.2.23"]


def test_no_aaaa_is_cached(daemon, fake_upstream):
    # getaddrinfo asks A and AAAA; "no AAAA" must be remembered.
    fake_upstream.add("v4.fake.test.", "A", 300, "192.0.2.24")
    d = daemon(fake_upstream.addr)
    for _ in range(3):
        assert a_addrs(udp(d.port, "v4.fake.test", "A")) == ["192.0.2.24"]
        r = udp(d.port, "v4.fake.test", "AAAA")
        assert r.rcode() == dns.rcode.NOERROR and not r.answer
    assert fake_upstream.count(name="v4.fake.test") == 2


def test_negative_ttl_uses_soa_ttl_when_smaller(daemon, fake_upstream):
    fake_upstream.soa_ttl = 30
    fake_upstream.soa_minimum = 3600
    d = daemon(fake_upstream.addr)
    assert udp(d.port, "gone.fake.test").rcode() == dns.rcode.NXDOMAIN
    r = udp(d.port, "gone.fake.test")
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert fake_upstream.count(name="gone.fake.test") == 1
    assert 20 <= soa_ttl(r) <= 30


def test_negative_caching_via_nsd(daemon, nsd):
    d = daemon(nsd.addr)
    for name, rdtype, top in ((f"nope.{ZONE}", "A", 60), (f"www.{ZONE}", "MX", 60),
                              (f"nope.{LOWTTL_ZONE}", "A", 45)):
        r1 = udp(d.port, name, rdtype)
        before = d.stats()["upstream_queries"]
        r2 = udp(d.port, name, rdtype)
        assert r2.rcode() == r1.rcode()
        assert d.stats()["upstream_queries"] == before, f"{name} {rdtype} not cached"
        assert top - 10 <= soa_ttl(r2) <= top


def test_negative_max_ttl_clamp(daemon, fake_upstream):
    d = daemon(fake_upstream.addr, config="negative-max-ttl = 10\n")
    udp(d.port, "clamped.fake.test")
    r = udp(d.port, "clamped.fake.test")
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert fake_upstream.count(name="clamped.fake.test") == 1
    assert 1 <= soa_ttl(r) <= 10


def test_max_ttl_clamp(daemon, fake_upstream):
    fake_upstream.add("long.fake.test.", "A", 50000, "192.0.2.25")
    d = daemon(fake_upstream.addr, config="max-ttl = 100\n")
    udp(d.port, "long.fake.test")
    r = udp(d.port, "long.fake.test")
    assert a_addrs(r) == ["192.0.2.25"]
    assert fake_upstream.count(name="long.fake.test") == 1
    assert 90 <= answer_ttl(r) <= 100


def test_min_ttl_clamp_keeps_entry(daemon, fake_upstream):
    fake_upstream.add("brief.fake.test.", "A", 1, "192.0.2.26")
    d = daemon(fake_upstream.addr, config="min-ttl = 60\n")
    udp(d.port, "brief.fake.test")
    time.sleep(2.0)
    r = udp(d.port, "brief.fake.test")
    assert a_addrs(r) == ["192.0.2.26"]
    assert fake_upstream.count(name="brief.fake.test") == 1, "min-ttl did not keep the entry"
    assert 50 <= answer_ttl(r) <= 60


def test_upstream_servfail_is_cached_briefly(daemon, fake_upstream):
    fake_upstream.mode = "servfail"
    d = daemon(fake_upstream.addr)
    r1 = udp(d.port, "broken.fake.test", timeout=5)
    assert r1.rcode() == dns.rcode.SERVFAIL
    n = fake_upstream.count(name="broken.fake.test")
    assert n >= 1
    r2 = udp(d.port, "broken.fake.test", timeout=5)
    assert r2.rcode() == dns.rcode.SERVFAIL
    assert fake_upstream.count(name="broken.fake.test") == n, "SERVFAIL was not cached (servfail-ttl 3s)"


def test_serve_stale_when_upstream_silent(daemon, fake_upstream):
    fake_upstream.add("stale.fake.test.", "A", 1, "192.0.2.27")
    d = daemon(fake_upstream.addr)
    assert a_addrs(udp(d.port, "stale.fake.test")) == ["192.0.2.27"]
    fake_upstream.mode = "drop"
    time.sleep(2.0)
    s0 = d.stats()
    r = udp(d.port, "stale.fake.test", timeout=6)
    assert r.rcode() == dns.rcode.NOERROR, f"expected a stale answer, got {dns.rcode.to_text(r.rcode())}"
    assert a_addrs(r) == ["192.0.2.27"]
    assert answer_ttl(r) == 30, "stale answers carry TTL 30 (RFC 8767)"
    assert d.stats()["stale_served"] == s0["stale_served"] + 1, "the answer did not come from the stale path"


def test_serve_stale_off(daemon, fake_upstream):
    fake_upstream.add("nostale.fake.test.", "A", 1, "192.0.2.28")
    d = daemon(fake_upstream.addr, config="serve-stale = false\n")
    assert a_addrs(udp(d.port, "nostale.fake.test")) == ["192.0.2.28"]
    fake_upstream.mode = "drop"
    time.sleep(1.5)
    r = udp(d.port, "nostale.fake.test", timeout=6)
    assert r.rcode() == dns.rcode.SERVFAIL


@pytest.mark.threaded
def test_bulk_names(daemon, nsd):
    d = daemon(nsd.addr)
    names = [f"bulk{i}.{ZONE}" for i in range(BULK_COUNT)]
    for round_no in range(2):
        before = d.stats()["upstream_queries"]
        replies = []
        for start in range(0, len(names), 50):  # 50 in flight at a time
            replies += many_udp(d.port, [make_query(n, "A") for n in names[start:start + 50]], timeout=6)
        missing = [names[i] for i, r in enumerate(replies) if r is None]
        assert not missing, f"round {round_no}: no answer for {len(missing)} names, e.g. {missing[:3]}"
        for i, r in enumerate(replies):
            assert a_addrs(r) == [bulk_addr(i)], names[i]
        if round_no == 1:
            assert d.stats()["upstream_queries"] == before, "second round was not served from the cache"
    s = d.stats()
    assert s["cache_entries"] >= BULK_COUNT


@pytest.mark.threaded
def test_cache_stays_within_budget(daemon, fake_upstream):
    blob = "x" * 200

    def gen(qname, rdtype):
        if rdtype != dns.rdatatype.TXT or not qname.to_text().lower().endswith(".gen.fake.test."):
            return None
        return [dns.rrset.from_text(qname, 3600, "IN", "TXT", *[f'"{blob}{i}"' for i in range(4)])]

    fake_upstream.generator = gen
    d = daemon(fake_upstream.addr, extra_args=["--cache-size", "1M"])
    s0 = d.stats()
    assert s0["cache_budget_bytes"] == 1024 * 1024
    total = 1600  # ~850 bytes of records each: well over 1 MiB in all
    for start in range(0, total, 50):
        qs = [make_query(f"n{i}.gen.fake.test", "TXT") for i in range(start, min(total, start + 50))]
        replies = many_udp(d.port, qs, timeout=6)
        assert all(r is not None and r.rcode() == dns.rcode.NOERROR for r in replies), \
            f"unanswered or failed queries in batch at {start}"
        s = d.stats()
        assert s["cache_bytes"] <= s["cache_budget_bytes"], s
    s = d.stats()
    assert s["evictions"] > 0, s
    assert 0 < s["cache_entries"] < total
    # Still serving, and a recent name is likely cached; an old one may have been evicted.
    assert udp(d.port, "n1599.gen.fake.test", "TXT").rcode() == dns.rcode.NOERROR
    assert udp(d.port, "n0.gen.fake.test", "TXT").rcode() == dns.rcode.NOERROR


def test_prefetch_refreshes_popular_entry(daemon, fake_upstream):
    # TTL 10: the last 10% is the final second. A popular entry asked for then is refreshed
    # in the background, so it is still answered from the cache after the original expiry.
    fake_upstream.add("hot.fake.test.", "A", 10, "192.0.2.29")
    d = daemon(fake_upstream.addr)
    t0 = time.monotonic()
    for _ in range(10):
        assert a_addrs(udp(d.port, "hot.fake.test")) == ["192.0.2.29"]
    assert fake_upstream.count(name="hot.fake.test") == 1
    time.sleep(max(0.0, t0 + 9.4 - time.monotonic()))
    r = udp(d.port, "hot.fake.test")
    assert a_addrs(r) == ["192.0.2.29"] and answer_ttl(r) <= 1
    # the background refresh happens soon after
    assert wait_until(lambda: fake_upstream.count(name="hot.fake.test") >= 2, timeout=2.0), \
        "no prefetch during the last 10% of the TTL"
    time.sleep(max(0.0, t0 + 10.8 - time.monotonic()))
    r = udp(d.port, "hot.fake.test")
    assert a_addrs(r) == ["192.0.2.29"]
    assert fake_upstream.count(name="hot.fake.test") == 2, "the refreshed entry was not used"
    assert answer_ttl(r) >= 7


@pytest.mark.threaded
def test_concurrent_mixed_load_with_flushes(daemon, nsd):
    # Several clients at once over UDP and TCP, hits and misses, while the control socket
    # flushes and reads stats: every answer must still be right.
    d = daemon(nsd.addr, threads=4)
    errors = []

    def client(seed):
        rng = random.Random(seed)
        try:
            for n in range(60):
                i = rng.randrange(40)
                name = f"bulk{i}.{ZONE}"
                r = tcp(d.port, name, timeout=5) if n % 3 == 0 else udp(d.port, name, timeout=5)
                if a_addrs(r) != [bulk_addr(i)]:
                    errors.append(f"{name}: {a_addrs(r)} rcode {r.rcode()}")
        except Exception as e:  # a timeout is a failure too
            errors.append(f"client {seed}: {e!r}")

    def control():
        try:
            for k in range(5):
                d.flush() if k % 2 == 0 else d.flush(f"bulk{k}.{ZONE}")
                d.stats()
        except Exception as e:
            errors.append(f"control: {e!r}")

    threads = [threading.Thread(target=client, args=(s,)) for s in range(4)] + [threading.Thread(target=control)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in threads), "clients did not finish within 60 s"
    assert not errors, errors[:5]
    s = d.stats()
    assert s["queries"] >= 240 and s["cache_hits"] > 0
