# SPDX-License-Identifier: BSD-3-Clause
"""Persistence (issue 3): the `cache-file` option across a restart with the right remaining
TTLs, damaged files skipped with a clear log line, and kill -9 leaving the previous file whole.
(test_control.py covers the dump/load commands and a basic cache-file restart.)"""

import hashlib
import os
import re
import signal
import struct
import subprocess
import time
from pathlib import Path

import dns.rcode
import pytest

from harness import clean_env
from dnshelpers import a_addrs, answer_ttl, make_query, many_udp, soa_ttl, udp

# name -> (TTL, address); `gone` expires between the two runs.
RECORDS = {
    "p300.fake.test": (300, "192.0.2.201"),
    "p120.fake.test": (120, "192.0.2.202"),
    "p40.fake.test": (40, "192.0.2.203"),
    "gone.fake.test": (1, "192.0.2.204"),
}
NEGATIVE = "absent.fake.test"  # NXDOMAIN, negative TTL min(600, 60) = 60


def cache_file_config(path):
    # dump and load by the tests use the same folder as the cache file.
    return f'cache-file = "{path}"\nstate-dir = "{path.parent}"\n'


def state_dir_config(path):
    return f'state-dir = "{path}"\n'


def test_cache_file_restart_serves_unexpired_entries_with_remaining_ttl(daemon, fake_upstream, tmp_path):
    for name, (ttl, addr) in RECORDS.items():
        fake_upstream.add(f"{name}.", "A", ttl, addr)
    fake_upstream.add("p300.fake.test.", "AAAA", 300, "2001:db8::201")
    cache_file = tmp_path / "nscache.cache"
    cfg = cache_file_config(cache_file)

    d1 = daemon(fake_upstream.addr, config=cfg)
    t_fill = time.monotonic()
    for name in RECORDS:
        assert a_addrs(udp(d1.port, name)) == [RECORDS[name][1]]
    assert udp(d1.port, "p300.fake.test", "AAAA").answer
    assert udp(d1.port, NEGATIVE).rcode() == dns.rcode.NXDOMAIN
    assert d1.stop() == 0, d1.stderr_text()
    assert cache_file.exists() and cache_file.stat().st_size > 0, "cache-file not written on SIGTERM"
    m = re.search(r"saved (\d+) entries", d1.stderr_text())
    assert m and int(m.group(1)) >= 6, d1.stderr_text()
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith("nscache.cache") and p != cache_file]
    assert not leftovers, f"temporary files left beside the cache file: {leftovers}"

    time.sleep(2.5)  # `gone` expires; the others age by the restart time
    upstream_before = {n: fake_upstream.count(name=n) for n in list(RECORDS) + [NEGATIVE]}
    d2 = daemon(fake_upstream.addr, config=cfg)
    m = re.search(r"loaded (\d+) entries from", d2.stderr_text())
    assert m, f"no 'loaded N entries' line:\n{d2.stderr_text()}"
    assert int(m.group(1)) >= 5, d2.stderr_text()
    assert "skipped" not in d2.stderr_text()
    elapsed = time.monotonic() - t_fill
    for name, (ttl, addr) in RECORDS.items():
        if name == "gone.fake.test":
            continue
        r = udp(d2.port, name)
        assert a_addrs(r) == [addr]
        want = ttl - elapsed
        assert want - 2 <= answer_ttl(r) <= want + 1, \
            f"{name}: TTL {answer_ttl(r)} after restart, want about {ttl} - {elapsed:.1f} s"
    r = udp(d2.port, "p300.fake.test", "AAAA")
    assert [x.address for rr in r.answer for x in rr] == ["2001:db8::201"]
    r = udp(d2.port, NEGATIVE)
    assert r.rcode() == dns.rcode.NXDOMAIN
    assert 60 - elapsed - 2 <= soa_ttl(r) <= 60 - elapsed + 1, f"negative TTL {soa_ttl(r)} after {elapsed:.1f} s"
    for n in [n for n in RECORDS if n != "gone.fake.test"] + [NEGATIVE]:
        assert fake_upstream.count(name=n) == upstream_before[n], f"{n} was asked upstream after the restart"
    # The expired one is fetched again.
    r = udp(d2.port, "gone.fake.test")
    assert a_addrs(r) == ["192.0.2.204"]
    assert fake_upstream.count(name="gone.fake.test") == upstream_before["gone.fake.test"] + 1


def test_dump_load_round_trip_keeps_remaining_ttl(daemon, fake_upstream, tmp_path):
    for name, (ttl, addr) in RECORDS.items():
        fake_upstream.add(f"{name}.", "A", ttl, addr)
    d1 = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    t_fill = time.monotonic()
    for name in RECORDS:
        udp(d1.port, name)
    path = tmp_path / "round.dump"
    r = d1.cli("dump", "--control", d1.control, str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"dumped (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) >= len(RECORDS) - 1, r.stdout + r.stderr  # `gone` may be expired already
    time.sleep(1.5)  # gone.fake.test (TTL 1) expires before the load
    d2 = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    r = d2.cli("load", "--control", d2.control, str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    m = re.search(r"loaded (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) == len(RECORDS) - 1, f"want every unexpired entry: {r.stdout}{r.stderr}"
    elapsed = time.monotonic() - t_fill
    before = {n: fake_upstream.count(name=n) for n in RECORDS}
    for name, (ttl, addr) in RECORDS.items():
        r = udp(d2.port, name)
        assert a_addrs(r) == [addr]
        if name == "gone.fake.test":
            assert fake_upstream.count(name=name) == before[name] + 1, "an expired entry was loaded"
            continue
        assert fake_upstream.count(name=name) == before[name], f"{name} was not loaded"
        want = ttl - elapsed
        assert want - 2 <= answer_ttl(r) <= want + 1, \
            f"{name}: TTL {answer_ttl(r)} after load, want about {ttl} - {elapsed:.1f} s"


def _valid_cache_file(daemon, fake_upstream, path):
    for i in range(5):
        fake_upstream.add(f"c{i}.fake.test.", "A", 300, f"192.0.2.{210 + i}")
    d = daemon(fake_upstream.addr, config=state_dir_config(path.parent))
    for i in range(5):
        udp(d.port, f"c{i}.fake.test")
    r = d.cli("dump", "--control", d.control, str(path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert d.stop() == 0
    return path.read_bytes()


def _flip(data, where):
    b = bytearray(data)
    for i in where:
        b[i % len(b)] ^= 0xFF
    return bytes(b)


CORRUPTIONS = {
    "truncated_half": lambda data: data[:len(data) // 2],
    "truncated_tail": lambda data: data[:-3],
    "header_only": lambda data: data[:16],
    "flipped_middle": lambda data: _flip(data, [len(data) // 2]),
    "flipped_many": lambda data: _flip(data, range(20, len(data), 37)),
    "future_version": lambda data: data[:8] + struct.pack("!I", 99) + data[12:],
    "foreign_text": lambda data: b"# this is not a cache file\nlisten = [\"127.0.0.1:53\"]\n" * 10,
    "foreign_binary": lambda data: Path("/bin/true").read_bytes()[:8192],
    "empty": lambda data: b"",
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_damaged_cache_file_is_skipped(daemon, fake_upstream, tmp_path, kind):
    path = tmp_path / "damaged.cache"
    good = _valid_cache_file(daemon, fake_upstream, path)
    path.write_bytes(CORRUPTIONS[kind](good))
    d = daemon(fake_upstream.addr, config=cache_file_config(path))
    log = d.stderr_text()
    lines = [l for l in log.splitlines() if str(path) in l or "cache file" in l]
    assert lines, f"nothing in the log about the {kind} cache file:\n{log}"
    assert any(re.match(r"^(?:<\d>)?(warning|error): ", l) and re.search(r"(?i)skip|corrupt|invalid|truncat", l)
               for l in lines), f"no clear warning about the {kind} cache file:\n{log}"
    assert not re.search(r"loaded [1-9]\d* entries", log), log
    s = d.stats()
    assert s["cache_entries"] == 0, f"{s['cache_entries']} entries from a {kind} file"
    before = fake_upstream.count(name="c0.fake.test")
    r = udp(d.port, "c0.fake.test")
    assert a_addrs(r) == ["192.0.2.210"]
    assert fake_upstream.count(name="c0.fake.test") == before + 1, "answered from a damaged file"
    assert udp(d.port, "whatever.fake.test").rcode() == dns.rcode.NXDOMAIN


def test_load_command_rejects_damaged_file(daemon, fake_upstream, tmp_path):
    path = tmp_path / "damaged.dump"
    good = _valid_cache_file(daemon, fake_upstream, path)
    path.write_bytes(_flip(good, [len(good) // 3]))
    d = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    r = d.cli("load", "--control", d.control, str(path))
    assert r.returncode != 0, f"load of a corrupt file succeeded: {r.stdout}{r.stderr}"
    assert str(path) in r.stdout + r.stderr or "corrupt" in r.stdout + r.stderr, r.stdout + r.stderr
    assert d.proc.poll() is None
    assert d.stats()["cache_entries"] == 0
    assert a_addrs(udp(d.port, "c1.fake.test")) == ["192.0.2.211"]


def _sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_kill9_leaves_previous_cache_file_intact(daemon, fake_upstream, tmp_path):
    for i in range(20):
        fake_upstream.add(f"k{i}.fake.test.", "A", 300, f"192.0.2.{220 + i}")
    cache_file = tmp_path / "killed.cache"
    cfg = cache_file_config(cache_file)
    d1 = daemon(fake_upstream.addr, config=cfg)
    for i in range(20):
        udp(d1.port, f"k{i}.fake.test")
    r = d1.cli("dump", "--control", d1.control, str(cache_file))
    assert r.returncode == 0, r.stdout + r.stderr
    first = _sha(cache_file)
    # More entries, then kill -9: the file is the one `dump` wrote.
    for start in range(0, 300, 50):
        many_udp(d1.port, [make_query(f"extra{i}.fake.test") for i in range(start, start + 50)], timeout=5)
    d1.stopped_by_test = True
    os.kill(d1.pid, signal.SIGKILL)
    d1.proc.wait(timeout=5)
    assert _sha(cache_file) == first, "kill -9 changed the cache file"

    # A second daemon loads it; then a dump is in progress when it is killed: the file is
    # the previous one or the complete new one, never a partial one.
    before = {i: fake_upstream.count(name=f"k{i}.fake.test") for i in range(20)}
    d2 = daemon(fake_upstream.addr, config=cfg)
    m = re.search(r"loaded (\d+) entries", d2.stderr_text())
    assert m and int(m.group(1)) >= 20, d2.stderr_text()
    for i in range(20):
        assert a_addrs(udp(d2.port, f"k{i}.fake.test")) == [f"192.0.2.{220 + i}"]
        assert fake_upstream.count(name=f"k{i}.fake.test") == before[i], f"k{i} was not loaded"
    for start in range(0, 500, 50):
        many_udp(d2.port, [make_query(f"more{i}.fake.test") for i in range(start, start + 50)], timeout=5)
    second = _sha(cache_file)
    dumper = subprocess.Popen([d2.binary, "dump", "--control", d2.control, str(cache_file)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=clean_env())
    try:
        time.sleep(0.003)
        d2.stopped_by_test = True
        os.kill(d2.pid, signal.SIGKILL)
        d2.proc.wait(timeout=5)
    finally:
        try:
            dumper.wait(timeout=5)
        except subprocess.TimeoutExpired:
            dumper.kill()
            dumper.wait(timeout=5)
    d3 = daemon(fake_upstream.addr, config=cfg)
    log = d3.stderr_text()
    assert "skipped" not in log, f"the file was damaged by kill -9 during a dump:\n{log}"
    m = re.search(r"loaded (\d+) entries", log)
    assert m and int(m.group(1)) >= 20, log
    if _sha(cache_file) == second:
        assert int(m.group(1)) >= 20
    else:
        assert int(m.group(1)) >= 300, f"a new file, but only {m.group(1)} entries: partial dump?"
    for i in range(20):
        assert a_addrs(udp(d3.port, f"k{i}.fake.test")) == [f"192.0.2.{220 + i}"]
        assert fake_upstream.count(name=f"k{i}.fake.test") == before[i]


def test_loaded_entries_are_clamped_by_max_ttl(daemon, fake_upstream, tmp_path):
    """A file from a daemon with other limits (or from anyone) gets this daemon's TTL rules:
    an entry dumped with TTL 86400 comes back with at most max-ttl."""
    fake_upstream.add("long.fake.test.", "A", 86400, "192.0.2.230")
    cache_file = tmp_path / "long.cache"
    d1 = daemon(fake_upstream.addr, config=f'cache-file = "{cache_file}"\n')
    assert answer_ttl(udp(d1.port, "long.fake.test")) > 86000
    assert d1.stop() == 0, d1.stderr_text()

    # At start-up from cache-file...
    d2 = daemon(fake_upstream.addr, config=f'cache-file = "{cache_file}"\nmax-ttl = 60\n')
    assert re.search(r"loaded 1 entries", d2.stderr_text()), d2.stderr_text()
    r = udp(d2.port, "long.fake.test")
    assert a_addrs(r) == ["192.0.2.230"] and fake_upstream.count(name="long.fake.test") == 1
    assert answer_ttl(r) <= 60, f"TTL {answer_ttl(r)} from the file, above max-ttl = 60"
    d2.stopped_by_test = True
    os.kill(d2.pid, signal.SIGKILL)  # keep the file as d1 wrote it
    d2.proc.wait(timeout=5)

    # ...and by `nscache load`.
    d3 = daemon(fake_upstream.addr, config=state_dir_config(tmp_path) + "max-ttl = 60\n")
    r = d3.cli("load", "--control", d3.control, cache_file.name)
    assert r.returncode == 0 and "loaded 1 entries" in r.stdout, r.stdout + r.stderr
    r = udp(d3.port, "long.fake.test")
    assert fake_upstream.count(name="long.fake.test") == 1, "the loaded entry was not used"
    assert answer_ttl(r) <= 60, f"TTL {answer_ttl(r)} after load, above max-ttl = 60"



def _rule_config(upstream, cluster, cache_file, caps=""):
    return (f'upstream = ["{upstream.addr}"]\ncache-file = "{cache_file}"\n'
            f'\n[[forward]]\ndomains = ["cluster.local"]\nupstreams = ["{cluster.addr}"]\n{caps}')


def test_a_forward_rule_under_a_local_zone_keeps_its_entries(daemon, fake_upstream, make_fake,
                                                              tmp_path, nscache):
    """cluster.local is under the local zone "local" (RFC 6762), but a [[forward]] rule sends
    it upstream: its entries were left out of the cache file at start (and flushed at every
    reload) as if the daemon answered them itself."""
    cluster = make_fake()
    cluster.add("svc.cluster.local.", "A", 3600, "10.96.0.1")
    cache_file = tmp_path / "rule.cache"
    config = _rule_config(fake_upstream, cluster, cache_file)
    d1 = daemon([], config=config)
    assert a_addrs(udp(d1.port, "svc.cluster.local")) == ["10.96.0.1"]
    assert d1.stop() == 0, d1.stderr_text()
    d2 = daemon([], config=config)
    assert re.search(r"loaded 1 entries", d2.stderr_text()), d2.stderr_text()
    assert a_addrs(udp(d2.port, "svc.cluster.local")) == ["10.96.0.1"]
    assert cluster.count(name="svc.cluster.local.") == 1, "the loaded entry was not used"
    r = subprocess.run([nscache, "reload", "--control", d2.control], capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert a_addrs(udp(d2.port, "svc.cluster.local")) == ["10.96.0.1"]
    assert cluster.count(name="svc.cluster.local.") == 1, "a reload flushed the rule's entries"


def test_loaded_entries_take_their_rules_caps(daemon, fake_upstream, make_fake, tmp_path):
    """The review of issue 20 (finding 6): a [[forward]] rule's max-ttl and negative-max-ttl
    hold for what the cache file brings back under the rule's domains, not only for what the
    rule's upstream answers."""
    cluster = make_fake()
    cluster.add("svc.cluster.local.", "A", 3600, "10.96.0.1")
    fake_upstream.add("long.fake.test.", "A", 3600, "192.0.2.231")
    cache_file = tmp_path / "rules.cache"

    def config(caps=""):
        return _rule_config(fake_upstream, cluster, cache_file, caps)

    d1 = daemon([], config=config())
    assert answer_ttl(udp(d1.port, "svc.cluster.local")) > 3000
    assert udp(d1.port, "gone.cluster.local").rcode() == dns.rcode.NXDOMAIN
    assert soa_ttl(udp(d1.port, "gone.cluster.local")) > 30
    assert answer_ttl(udp(d1.port, "long.fake.test")) > 3000
    assert d1.stop() == 0, d1.stderr_text()
    assert "saved 3 entries" in d1.stderr_text(), d1.stderr_text()

    d2 = daemon([], config=config("max-ttl = 30\nnegative-max-ttl = 10\n"))
    assert re.search(r"loaded 3 entries", d2.stderr_text()), d2.stderr_text()
    r = udp(d2.port, "svc.cluster.local")
    assert a_addrs(r) == ["10.96.0.1"] and cluster.count(name="svc.cluster.local.") == 1
    assert answer_ttl(r) <= 30, f"TTL {answer_ttl(r)} from the file, above the rule's max-ttl"
    neg = udp(d2.port, "gone.cluster.local")
    assert neg.rcode() == dns.rcode.NXDOMAIN and cluster.count(name="gone.cluster.local.") == 1
    assert soa_ttl(neg) <= 10, f"negative TTL {soa_ttl(neg)} above the rule's negative-max-ttl"
    # Names of no capped rule keep the file's TTL.
    assert answer_ttl(udp(d2.port, "long.fake.test")) > 3000
    assert fake_upstream.count(name="long.fake.test.") == 1
    d2.stopped_by_test = True
    os.kill(d2.pid, signal.SIGKILL)  # keep the file as d1 wrote it
    d2.proc.wait(timeout=5)

    # ...and by `nscache load`.
    caps = "max-ttl = 30\nnegative-max-ttl = 10\n"
    d3 = daemon([], config=f'state-dir = "{tmp_path}"\n' + config(caps).replace(
        f'cache-file = "{cache_file}"\n', ""))
    r = d3.cli("load", "--control", d3.control, cache_file.name)
    assert r.returncode == 0 and "loaded 3 entries" in r.stdout, r.stdout + r.stderr
    r = udp(d3.port, "svc.cluster.local")
    assert cluster.count(name="svc.cluster.local.") == 1, "the loaded entry was not used"
    assert answer_ttl(r) <= 30, f"TTL {answer_ttl(r)} after load, above the rule's max-ttl"
    assert soa_ttl(udp(d3.port, "gone.cluster.local")) <= 10
