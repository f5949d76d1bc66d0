# SPDX-License-Identifier: BSD-3-Clause
"""Split DNS ([[forward]], longest suffix wins), names that never leave the host (RFC 6761,
RFC 6303 private reverse zones, .onion, home.arpa), CHAOS identity queries answered here, and
local records (issue 10 items 3 and 4)."""

import subprocess

import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.reversename

from dnshelpers import a_addrs, aaaa_addrs, wait_until


def ask(port, name, rdtype="A", rdclass="IN"):
    q = dns.message.make_query(name, rdtype, rdclass, use_edns=0)
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=3)


def total_queries(*fakes):
    return sum(f.count() for f in fakes)


def test_split_dns_longest_suffix_wins(daemon, make_fake):
    default, corp, deep = make_fake(), make_fake(), make_fake()
    default.add("www.other.test.", "A", 300, "192.0.2.1")
    corp.add("www.corp.test.", "A", 300, "192.0.2.2")
    corp.add("5.0.0.10.in-addr.arpa.", "PTR", 300, "host.corp.test.")
    deep.add("x.deep.corp.test.", "A", 300, "192.0.2.3")
    d = daemon([], config=f'''upstream = ["{default.addr}"]

[[forward]]
domains = ["corp.test", "10.in-addr.arpa"]
upstreams = ["{corp.addr}"]

[[forward]]
domains = ["Deep.Corp.Test."]
upstreams = ["{deep.addr}"]
no-cache = true
''')
    assert a_addrs(ask(d.port, "www.corp.test")) == ["192.0.2.2"]
    assert a_addrs(ask(d.port, "x.deep.corp.test")) == ["192.0.2.3"]
    assert a_addrs(ask(d.port, "www.other.test")) == ["192.0.2.1"]
    # An explicit rule beats the built-in private reverse zone of the same name.
    r = ask(d.port, "5.0.0.10.in-addr.arpa", "PTR")
    assert r.answer and str(r.answer[0][0].target) == "host.corp.test."
    assert corp.count(name="www.corp.test.") == 1 and default.count(name="www.corp.test.") == 0
    assert deep.count(name="x.deep.corp.test.") == 1 and corp.count(name="x.deep.corp.test.") == 0
    # no-cache: asked again every time.
    assert a_addrs(ask(d.port, "x.deep.corp.test")) == ["192.0.2.3"]
    assert deep.count(name="x.deep.corp.test.") == 2
    assert a_addrs(ask(d.port, "www.corp.test")) == ["192.0.2.2"]
    assert corp.count(name="www.corp.test.") == 1  # cached


def test_local_names_never_reach_an_upstream(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    for name in ("1.1.168.192.in-addr.arpa", "9.0.16.172.in-addr.arpa", "1.0.0.10.in-addr.arpa",
                 "b.a.9.8.7.6.5.0.4.0.0.0.3.0.0.0.2.0.0.0.1.0.0.0.0.0.0.0.1.2.3.4.d.f.ip6.arpa",
                 "1.2.64.100.in-addr.arpa"):
        r = ask(d.port, name, "PTR")
        assert r.rcode() == dns.rcode.NXDOMAIN, name
        assert r.authority and r.authority[0].rdtype == dns.rdatatype.SOA, name
    for name in ("printer.local", "x.invalid", "hidden.onion", "router.home.arpa"):
        assert ask(d.port, name).rcode() == dns.rcode.NXDOMAIN, name
    assert a_addrs(ask(d.port, "localhost")) == ["127.0.0.1"]
    assert aaaa_addrs(ask(d.port, "db.localhost", "AAAA")) == ["::1"]
    mx = ask(d.port, "localhost", "MX")
    assert mx.rcode() == dns.rcode.NOERROR and not mx.answer
    assert fake_upstream.count() == 0, "a local name leaked upstream"


def test_private_zones_can_be_forwarded(daemon, fake_upstream):
    d = daemon(fake_upstream.addr, config="forward-private-zones = true\n")
    ask(d.port, "1.1.168.192.in-addr.arpa", "PTR")
    ask(d.port, "printer.local")
    assert fake_upstream.count(name="1.1.168.192.in-addr.arpa.") == 1
    assert fake_upstream.count(name="printer.local.") == 1
    assert a_addrs(ask(d.port, "localhost")) == ["127.0.0.1"]  # always local
    assert fake_upstream.count(name="localhost.") == 0


def test_chaos_queries_are_answered_here(daemon, make_fake):
    plain, named = make_fake(), make_fake()
    d = daemon(plain.addr)
    for name in ("version.bind", "id.server", "hostname.bind", "version.server"):
        r = ask(d.port, name, "TXT", "CH")
        assert r.rcode() == dns.rcode.REFUSED, name
        assert not r.flags & dns.flags.AA, f"{name}: a refusal is not authoritative"
    assert plain.count() == 0
    e = daemon(named.addr, config='chaos-version = "nscache"\nchaos-id = "cache-7"\n')
    r = ask(e.port, "version.bind", "TXT", "CH")
    assert r.rcode() == dns.rcode.NOERROR and r.flags & dns.flags.AA
    assert r.answer[0].rdclass == dns.rdataclass.CH
    assert b"".join(r.answer[0][0].strings) == b"nscache"
    assert b"".join(ask(e.port, "id.server", "TXT", "CH").answer[0][0].strings) == b"cache-7"
    assert named.count() == 0


def test_local_records_with_their_ptrs_and_nodata(daemon, fake_upstream, nscache):
    config = f'''upstream = ["{fake_upstream.addr}"]
local-ttl = "2m"
local-records = [
  "printer.lan A 192.168.1.9",
  "printer.lan AAAA fd00::9",
  "alias.lan CNAME printer.lan",
  "info.lan TXT \\"hello world\\"",
]
'''
    d = daemon([], config=config)
    r = ask(d.port, "printer.lan")
    assert a_addrs(r) == ["192.168.1.9"] and r.answer[0].ttl == 120
    assert aaaa_addrs(ask(d.port, "PRINTER.lan", "AAAA")) == ["fd00::9"]
    alias = ask(d.port, "alias.lan")
    assert [rr.rdtype for rr in alias.answer] == [dns.rdatatype.CNAME, dns.rdatatype.A]
    assert a_addrs(alias) == ["192.168.1.9"]
    ptr = ask(d.port, "9.1.168.192.in-addr.arpa", "PTR")
    assert str(ptr.answer[0][0].target) == "printer.lan."
    ptr6 = ask(d.port, dns.reversename.from_address("fd00::9").to_text(), "PTR")
    assert str(ptr6.answer[0][0].target) == "printer.lan."
    txt = ask(d.port, "info.lan", "TXT")
    assert b"".join(txt.answer[0][0].strings) == b"hello world"
    nodata = ask(d.port, "printer.lan", "MX")
    assert nodata.rcode() == dns.rcode.NOERROR and not nodata.answer
    assert fake_upstream.count() == 0
    # A reload brings a new name in (and a name that was cached from upstream gives way).
    fake_upstream.add("nas.lan.", "A", 300, "203.0.113.1")
    assert a_addrs(ask(d.port, "nas.lan")) == ["203.0.113.1"]
    head, _, _ = config.rpartition("]\n")
    (d.workdir / "nscache.toml").write_text(head + '  "nas.lan A 192.168.1.10",\n]\n')
    r = subprocess.run([nscache, "reload", "--control", d.control], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert a_addrs(ask(d.port, "nas.lan")) == ["192.168.1.10"]


def test_hosts_file_names_are_answered_and_followed(daemon, fake_upstream, tmp_path):
    """hosts-file (as dnsmasq reads /etc/hosts): every name and alias answers its addresses and
    its PTR, other types get NODATA, a name DNS cannot carry is skipped, and an edit is seen
    without a reload, replacing what the cache held for the name."""
    hosts = tmp_path / "hosts"
    hosts.write_text("# comment\n192.0.2.50  nas.home.test nas-alias.test  # trailing\n"
                     "2001:db8::50 nas.home.test\nnot-an-address bad.test\n"
                     "192.0.2.51 " + "x" * 70 + ".test\n")
    fake_upstream.add("later.home.test.", "A", 300, "203.0.113.9")
    d = daemon([], config=f'upstream = ["{fake_upstream.addr}"]\nhosts-file = "{hosts}"\n')
    assert a_addrs(ask(d.port, "NAS.home.test")) == ["192.0.2.50"]
    assert a_addrs(ask(d.port, "nas-alias.test")) == ["192.0.2.50"]
    assert aaaa_addrs(ask(d.port, "nas.home.test", "AAAA")) == ["2001:db8::50"]
    ptr = ask(d.port, "50.2.0.192.in-addr.arpa", "PTR")
    assert str(ptr.answer[0][0].target) == "nas.home.test."
    mx = ask(d.port, "nas.home.test", "MX")
    assert mx.rcode() == dns.rcode.NOERROR and not mx.answer
    assert fake_upstream.count() == 0
    assert a_addrs(ask(d.port, "later.home.test")) == ["203.0.113.9"]  # cached from upstream

    tmp = tmp_path / "hosts.new"
    tmp.write_text("192.0.2.60 later.home.test\n")
    tmp.rename(hosts)  # as editors and configuration tools replace it
    assert wait_until(lambda: a_addrs(ask(d.port, "later.home.test")) == ["192.0.2.60"],
                      timeout=10)
    assert ask(d.port, "nas.home.test").rcode() == dns.rcode.NXDOMAIN  # the upstream's word now
    assert fake_upstream.count(name="nas.home.test.") == 1


def test_bad_local_records_and_forwards_are_config_errors(nscache, tmp_path):
    cases = {
        'local-records = ["x.lan MX 10 mail"]': "type 'MX'",
        'local-records = ["x.lan A 300.1.1.1"]': "bad A address",
        '[[forward]]\ndomains = ["corp.test"]\n': "needs domains",
        '[[forward]]\ndomains = ["a..b"]\nupstreams = ["127.0.0.1"]\n': "bad domain",
    }
    for text, want in cases.items():
        conf = tmp_path / "n.toml"
        conf.write_text(text + "\n")
        r = subprocess.run([nscache, "check-config", str(conf)], capture_output=True, text=True, timeout=10)
        assert r.returncode == 2 and want in r.stderr, (text, r.stderr)
