# SPDX-License-Identifier: BSD-3-Clause
"""What a node-local cache needs of [[forward]] rules (issue 20 item 5): transport = "tcp"
(every query to the rule's upstreams over TCP, on kept-open connections) and the rule's own
max-ttl and negative-max-ttl over the global ones; a reload applies changes to both."""

import os
import re
import subprocess

import dns.message
import dns.query
import dns.rcode

from dnshelpers import a_addrs
from harness import REPO


def ask(port, name, rdtype="A", timeout=3.0):
    q = dns.message.make_query(name, rdtype, use_edns=0)
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout)


def reload(d, nscache, text):
    path = d.workdir / "nscache.toml"
    tmp = d.workdir / "nscache.toml.new"
    tmp.write_text(text)
    os.rename(tmp, path)
    r = subprocess.run([nscache, "reload", "--control", d.control], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr


def rule(upstream, extra=""):
    return f'\n[[forward]]\ndomains = ["cluster.local"]\nupstreams = ["{upstream}"]\n{extra}'


def answer_ttl(r):
    return min(rrset.ttl for rrset in r.answer)


def test_tcp_rule_sends_no_udp_and_reuses_its_connection(daemon, make_fake):
    public, cluster = make_fake(), make_fake()
    for i in range(5):
        cluster.add(f"svc{i}.cluster.local.", "A", 30, f"10.96.0.{i + 1}")
    public.add("www.fake.test.", "A", 300, "192.0.2.1")
    d = daemon([], threads=1,
               config=f'upstream = ["{public.addr}"]\n' + rule(cluster.addr, 'transport = "tcp"\n'))
    for i in range(5):
        assert a_addrs(ask(d.port, f"svc{i}.cluster.local")) == [f"10.96.0.{i + 1}"]
    r = ask(d.port, "nothing.cluster.local")
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert cluster.count(transport="udp") == 0, cluster.queries
    assert cluster.count(transport="tcp") == 6
    # One worker, one server: one connection carried them all (the worker keeps it open).
    assert len({q["source"] for q in cluster.queries}) == 1, cluster.queries
    # The default rule still asks over UDP.
    assert a_addrs(ask(d.port, "www.fake.test")) == ["192.0.2.1"]
    assert public.count(transport="udp") == 1 and public.count(transport="tcp") == 0


def test_rule_ttl_caps_apply_and_the_smaller_wins(daemon, make_fake):
    public, cluster = make_fake(), make_fake()
    cluster.add("svc.cluster.local.", "A", 300, "10.96.0.1")
    cluster.add("short.cluster.local.", "A", 5, "10.96.0.2")
    public.add("www.fake.test.", "A", 300, "192.0.2.1")
    config = (f'upstream = ["{public.addr}"]\nmax-ttl = 3600\nnegative-max-ttl = 3600\n' +
              rule(cluster.addr, 'transport = "tcp"\nmax-ttl = 30\nnegative-max-ttl = 10\n'))
    d = daemon([], config=config)
    first = ask(d.port, "svc.cluster.local")
    assert answer_ttl(first) <= 30
    cached = ask(d.port, "svc.cluster.local")  # from the cache: the cap was stored
    assert cluster.count(name="svc.cluster.local.") == 1
    assert 0 < answer_ttl(cached) <= 30
    # Below the cap, the upstream's TTL stays.
    assert answer_ttl(ask(d.port, "short.cluster.local")) <= 5
    # Negative answers: the SOA's TTL (MINIMUM 60) capped at 10.
    neg = ask(d.port, "gone.cluster.local")
    assert neg.rcode() == dns.rcode.NXDOMAIN
    assert neg.authority and max(rrset.ttl for rrset in neg.authority) <= 10
    again = ask(d.port, "gone.cluster.local")
    assert cluster.count(name="gone.cluster.local.") == 1
    assert max(rrset.ttl for rrset in again.authority) <= 10
    # Other names keep the global caps.
    assert answer_ttl(ask(d.port, "www.fake.test")) > 30


def test_global_caps_win_when_smaller(daemon, make_fake):
    public, cluster = make_fake(), make_fake()
    cluster.add("svc.cluster.local.", "A", 300, "10.96.0.1")
    d = daemon([], config=f'upstream = ["{public.addr}"]\nmax-ttl = 20\n' +
               rule(cluster.addr, "max-ttl = 120\n"))
    assert answer_ttl(ask(d.port, "svc.cluster.local")) <= 20
    assert cluster.count(transport="udp") == 1  # "udp" is the default


def test_reload_switches_transport_and_caps(daemon, make_fake, nscache):
    public, cluster = make_fake(), make_fake()
    cluster.add("a.cluster.local.", "A", 300, "10.96.0.1")
    cluster.add("b.cluster.local.", "A", 300, "10.96.0.2")
    base = f'upstream = ["{public.addr}"]\n'
    d = daemon([], config=base + rule(cluster.addr))
    assert answer_ttl(ask(d.port, "a.cluster.local")) > 30
    assert cluster.count(transport="udp") == 1
    reload(d, nscache, base + rule(cluster.addr, 'transport = "tcp"\nmax-ttl = 30\n'))
    # A lower cap flushes what the rule's names had cached under the old one.
    assert answer_ttl(ask(d.port, "a.cluster.local")) <= 30
    assert answer_ttl(ask(d.port, "b.cluster.local")) <= 30
    assert cluster.count(transport="udp") == 1
    assert cluster.count(transport="tcp") == 2
    reload(d, nscache, base + rule(cluster.addr, 'transport = "udp"\n'))
    cluster.add("c.cluster.local.", "A", 300, "10.96.0.3")
    assert a_addrs(ask(d.port, "c.cluster.local")) == ["10.96.0.3"]
    assert cluster.count(transport="udp") == 2


def test_bad_rule_values_are_refused_with_clear_messages(nscache, tmp_path):
    cases = [
        ('transport = "quic"\n', 'forward.transport: expected "udp" or "tcp"'),
        ("transport = 1\n", 'forward.transport: expected "udp" or "tcp"'),
        ("max-ttl = -1\n", "forward.max-ttl: expected a whole number from 0 to 2147483647"),
        ('negative-max-ttl = "soon"\n',
         "forward.negative-max-ttl: expected a whole number from 0 to 2147483647"),
    ]
    for extra, message in cases:
        conf = tmp_path / "bad.toml"
        conf.write_text('upstream = ["127.0.0.1:53"]\n' + rule("127.0.0.1:5353", extra))
        r = subprocess.run([nscache, "check-config", str(conf)], capture_output=True, text=True,
                           timeout=10)
        assert r.returncode != 0, extra
        assert message in r.stdout + r.stderr, (extra, r.stdout + r.stderr)


def test_node_local_example_in_the_docs_is_a_valid_config(nscache, tmp_path):
    text = (REPO / "docs" / "node-local.md").read_text()
    block = re.search(r"```toml\n(.*?)```", text, re.S)
    assert block, "docs/node-local.md has no TOML example"
    conf = tmp_path / "node-local.toml"
    conf.write_text(block.group(1))
    r = subprocess.run([nscache, "check-config", str(conf)], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0, r.stdout + r.stderr


def test_tcp_rule_probes_an_upstream_marked_down_over_tcp(daemon, make_fake):
    """The review of issue 20 (finding 5): the probes of a server marked down went over UDP
    even for a transport = "tcp" rule, whose servers may not answer UDP at all."""
    import concurrent.futures

    from dnshelpers import wait_until

    public, cluster = make_fake(), make_fake()
    cluster.add("svc.cluster.local.", "A", 30, "10.96.0.1")
    cluster.mode = "drop"  # silent (over TCP too) until marked down
    d = daemon([], threads=1, config=f'upstream = ["{public.addr}"]\nquery-timeout = "1500ms"\n' +
               rule(cluster.addr, 'transport = "tcp"\n'))
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda i: _ask_or_none(d.port, f"q{i}.cluster.local"), range(4)))
    assert wait_until(lambda: "marked down" in d.stderr_text(), timeout=10), d.stderr_text()
    cluster.mode = "normal"
    assert wait_until(lambda: "is up" in d.stderr_text(), timeout=10), d.stderr_text()
    assert cluster.count(transport="udp") == 0, [q for q in cluster.queries if q["transport"] == "udp"]
    assert any(q["name"] == "." for q in cluster.queries), "no probe reached the upstream"
    assert a_addrs(ask(d.port, "svc.cluster.local")) == ["10.96.0.1"]
    assert cluster.count(transport="udp") == 0


def _ask_or_none(port, name):
    try:
        return ask(port, name, timeout=5.0)
    except Exception:
        return None
