# SPDX-License-Identifier: BSD-3-Clause
"""DNS cookies towards upstream servers (RFC 7873, RFC 9018; issue 16 item 15): a client
cookie on every UDP query, the server's cookie echoed, answers without our cookie dropped."""

import dns.rcode
import pytest

from dnshelpers import a_addrs, udp
from fakeupstream import FORGED_A


def _cookies(fake, name):
    with fake.lock:
        return [q["cookie"] for q in fake.queries
                if q["transport"] == "udp" and q["name"] == name + "."]


def test_client_cookie_sent_and_server_cookie_echoed(daemon, fake_upstream):
    fake_upstream.cookies = True
    for n in ("one", "two"):
        fake_upstream.add(f"{n}.fake.test.", "A", 300, "192.0.2.31")
    d = daemon(fake_upstream.addr, threads=1)
    assert a_addrs(udp(d.port, "one.fake.test")) == ["192.0.2.31"]
    assert a_addrs(udp(d.port, "two.fake.test")) == ["192.0.2.31"]
    first, = _cookies(fake_upstream, "one.fake.test")
    second, = _cookies(fake_upstream, "two.fake.test")
    assert first is not None and len(first) == 8, "no client cookie on the first query"
    assert len(second) == 24 and second[:8] == first, "the server cookie was not echoed"
    assert bytes(second[8:]) == fake_upstream.server_cookie(bytes(first))
    # The server's cookie is the daemon's business only: the client's answer has none.
    r = udp(d.port, "one.fake.test")
    assert all(o.otype != 10 for o in r.options)


def test_client_cookie_differs_per_server(daemon, make_fake):
    a, b = make_fake(), make_fake()
    for f in (a, b):
        f.cookies = True
        f.add("both.fake.test.", "A", 300, "192.0.2.32")
    a.mode = b.mode = "drop"  # both are asked
    d = daemon([a.addr, b.addr], threads=1, config='query-timeout = "1s"\n')
    udp(d.port, "both.fake.test")
    ca, cb = _cookies(a, "both.fake.test"), _cookies(b, "both.fake.test")
    assert ca and cb and all(c is not None and len(c) == 8 for c in ca + cb)
    assert len(set(bytes(c) for c in ca)) == 1 and len(set(bytes(c) for c in cb)) == 1
    assert ca[0] != cb[0], "one client cookie for two servers tracks the client across them"


@pytest.mark.parametrize("kind", ["wrong_cookie", "no_cookie"])
def test_answer_without_our_cookie_is_dropped_and_counted(daemon, fake_upstream, kind):
    fake_upstream.cookies = True
    fake_upstream.add("learn.fake.test.", "A", 300, "192.0.2.33")
    fake_upstream.add("victim.fake.test.", "A", 300, "192.0.2.34")
    d = daemon(fake_upstream.addr, threads=1)
    # The server shows it does cookies; from then on an answer must carry ours.
    assert a_addrs(udp(d.port, "learn.fake.test")) == ["192.0.2.33"]
    fake_upstream.forge = [kind]
    fake_upstream.forge_gap_ms = 100
    r = udp(d.port, "victim.fake.test", timeout=6)
    assert FORGED_A not in a_addrs(r)
    assert a_addrs(r) == ["192.0.2.34"]
    s = d.stats()
    assert s["upstream_bad_cookies"] >= 1, f"the {kind} answer was not counted"
    assert s["upstream_sockets_spoofed"] >= 1, "the socket it came on was not retired"


def test_badcookie_is_retried_with_the_new_server_cookie(daemon, fake_upstream):
    fake_upstream.cookies = True
    fake_upstream.cookie_require = True
    fake_upstream.add("strict.fake.test.", "A", 300, "192.0.2.35")
    d = daemon(fake_upstream.addr, threads=1)
    r = udp(d.port, "strict.fake.test", timeout=6)
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.35"]
    sent = _cookies(fake_upstream, "strict.fake.test")
    assert len(sent) == 2, f"{len(sent)} UDP queries: BADCOOKIE is retried once, at once"
    assert len(sent[0]) == 8 and len(sent[1]) == 24
    # Cached: the answer, never the BADCOOKIE.
    r = udp(d.port, "strict.fake.test")
    assert a_addrs(r) == ["192.0.2.35"]
    assert len(_cookies(fake_upstream, "strict.fake.test")) == 2


def test_formerr_to_the_cookie_is_retried_without_it(daemon, fake_upstream):
    # An old forwarder or home router that rejects an EDNS option it does not know.
    fake_upstream.formerr_on_cookie = True
    fake_upstream.add("old.fake.test.", "A", 300, "192.0.2.36")
    fake_upstream.add("later.fake.test.", "A", 300, "192.0.2.37")
    d = daemon(fake_upstream.addr, threads=1)
    r = udp(d.port, "old.fake.test", timeout=6)
    assert r.rcode() == dns.rcode.NOERROR and a_addrs(r) == ["192.0.2.36"]
    sent = _cookies(fake_upstream, "old.fake.test")
    assert len(sent) == 2, f"{len(sent)} UDP queries: FORMERR is retried once, at once"
    assert sent[0] is not None and sent[1] is None
    # Remembered: the next question goes without a cookie from the start.
    r = udp(d.port, "later.fake.test", timeout=6)
    assert a_addrs(r) == ["192.0.2.37"]
    assert _cookies(fake_upstream, "later.fake.test") == [None]


def test_upstream_cookies_false_sends_none(daemon, fake_upstream):
    fake_upstream.cookies = True
    fake_upstream.add("plain.fake.test.", "A", 300, "192.0.2.38")
    d = daemon(fake_upstream.addr, threads=1, config="upstream-cookies = false\n")
    assert a_addrs(udp(d.port, "plain.fake.test")) == ["192.0.2.38"]
    assert _cookies(fake_upstream, "plain.fake.test") == [None]
