# SPDX-License-Identifier: BSD-3-Clause
"""libnss_nscache.so.2 with the real daemon: `nscache serve --nss-socket ...`
forwarding to the fake upstream (addresses 192.0.2.x, 2001:db8::x), clients in the test
namespaces with `hosts: files nscache dns`, where glibc's own dns module would reach NSD on
127.0.0.1:53 (addresses 198.51.100.x, 2001:db8:53::x). An answer's address tells which path
gave it."""

import fcntl
import mmap
import os
import shutil
import subprocess
import threading
import time

import dns.rdatatype
import dns.rrset
import pytest

import nssproto as p
from nssclient import (HOST_NOT_FOUND, NO_DATA, NSS_NOTFOUND, NSS_SUCCESS, NSS_UNAVAIL, PausedClient, client,
                       direct, getent_ahosts, getent_hosts, py_getaddrinfo)


@pytest.fixture
def nssd(nss_daemon, dns_nsd):
    return nss_daemon()


def test_getent_hosts(netns, nssd):
    assert getent_hosts(netns, "www.example.test") == ("192.0.2.1", ["www.example.test"])
    assert getent_hosts(netns, "v6only.example.test") == ("2001:db8::6", ["v6only.example.test"])
    assert getent_hosts(netns, "dual.example.test") == ("2001:db8::3", ["dual.example.test"])
    assert getent_hosts(netns, "alias.example.test") == ("192.0.2.1", ["www.example.test", "alias.example.test"])
    assert getent_hosts(netns, "alias2.example.test") == \
        ("192.0.2.1", ["www.example.test", "alias2.example.test", "alias.example.test"])
    assert getent_hosts(netns, "missing.example.test") is None
    # unqualified: resolv.conf's search list
    assert getent_hosts(netns, "www") == ("192.0.2.1", ["www.example.test"])


def test_getent_ahosts(netns, nssd):
    assert getent_ahosts(netns, "www.example.test") == ({"192.0.2.1"}, "www.example.test")
    assert getent_ahosts(netns, "v6only.example.test") == ({"2001:db8::6"}, "v6only.example.test")
    assert getent_ahosts(netns, "dual.example.test") == ({"192.0.2.3", "2001:db8::3"}, "dual.example.test")
    assert getent_ahosts(netns, "alias.example.test") == ({"192.0.2.1"}, "www.example.test")
    assert getent_ahosts(netns, "multi.example.test")[0] == {"192.0.2.11", "192.0.2.12", "192.0.2.13"}
    assert getent_ahosts(netns, "missing.example.test") is None


def test_notfound_falls_through_unless_told_to_return(netns, nssd):
    """glibc continues after NOTFOUND by default: a name the daemon's upstream lacks is then
    asked of dns. `[NOTFOUND=return]` (docs/nss.md) makes nscache's answer final."""
    assert getent_ahosts(netns, "nx-upstream.example.test")[0] == {"198.51.100.99"}
    final = netns.nsswitch_file("files nscache [NOTFOUND=return] dns")
    assert getent_ahosts(netns, "nx-upstream.example.test", final) is None


MANY_ADDRESSES = [f"192.0.2.{100 + i}" for i in range(40)]  # conftest's many.example.test


def test_many_addresses_through_glibc(netns, nssd):
    """40 A records with `hosts: nscache` alone: glibc's first buffer is too small, the module
    reports ERANGE through errnop == &errno, and glibc asks again with a bigger one."""
    only = netns.nsswitch_file("nscache")
    for _ in range(2):  # from the socket, then from the map
        got = getent_ahosts(netns, "many.example.test", only)
        assert got is not None and got[0] == set(MANY_ADDRESSES), got
        assert py_getaddrinfo(netns, "many.example.test", 2, only) == sorted(MANY_ADDRESSES)


def test_c_client(netns, nss_build, nssd):
    r = client(netns, nss_build, "gai", "dual.example.test", "4")
    assert r.values("addr") == ["192.0.2.3"] and r.value("canon") == "dual.example.test", r
    r = client(netns, nss_build, "gai", "dual.example.test", "6")
    assert r.values("addr") == ["2001:db8::3"], r
    r = client(netns, nss_build, "gai", "dual.example.test", "0")
    assert sorted(r.values("addr")) == ["192.0.2.3", "2001:db8::3"], r
    r = client(netns, nss_build, "gai", "alias.example.test", "0")
    assert r.values("addr") == ["192.0.2.1"] and r.value("canon") == "www.example.test", r
    r = client(netns, nss_build, "gethostbyname", "alias2.example.test")
    assert r.value("name") == "www.example.test", r
    assert r.values("alias") == ["alias2.example.test", "alias.example.test"], r
    r = client(netns, nss_build, "byaddr", "192.0.2.1")
    assert r.value("name") == "www.example.test" and r.values("addr") == ["192.0.2.1"], r
    r = client(netns, nss_build, "byaddr", "2001:db8::3")
    assert r.value("name") == "dual.example.test", r
    r = client(netns, nss_build, "byname_small", "multi.example.test", "4")
    assert int(r.value("erange")) > 0 and len(r.values("addr")) == 3, r


def test_python_getaddrinfo(netns, nssd):
    assert py_getaddrinfo(netns, "dual.example.test", 0) == ["192.0.2.3", "2001:db8::3"]
    assert py_getaddrinfo(netns, "v6only.example.test", 10) == ["2001:db8::6"]
    assert py_getaddrinfo(netns, "www.example.test", 2) == ["192.0.2.1"]


def _set_a(upstream, name, ttl, address):
    rrset = dns.rrset.from_text(name, ttl, "IN", "A", address)
    with upstream.lock:
        upstream.records[(rrset.name.to_text().lower(), dns.rdatatype.A)] = [rrset]


def test_changed_record_seen_once_its_ttl_passed(netns, nss_build, nssd):
    _set_a(nssd.upstream, "change.example.test.", 2, "192.0.2.70")
    r = client(netns, nss_build, "gai", "change.example.test", "0")
    assert r.values("addr") == ["192.0.2.70"], r
    _set_a(nssd.upstream, "change.example.test.", 2, "192.0.2.71")
    changed = time.monotonic()
    time.sleep(3.2)  # the 2 s TTL has passed, with a second to spare for the clocks' rounding
    for fam in ("0", "4"):
        r = client(netns, nss_build, "gai", "change.example.test", fam)
        assert r.values("addr") == ["192.0.2.71"], f"{time.monotonic() - changed:.1f} s after the change: {r}"
    assert getent_hosts(netns, "change.example.test")[0] == "192.0.2.71"


def test_daemon_stopped_dns_takes_over(netns, nss_build, nssd):
    assert getent_hosts(netns, "www.example.test")[0] == "192.0.2.1"
    assert nssd.daemon.stop() == 0
    assert not nssd.socket_path.exists(), "the daemon leaves its NSS socket behind"
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test")
    assert r.status == NSS_UNAVAIL, r
    assert getent_hosts(netns, "www.example.test")[0] == "198.51.100.1"
    assert getent_ahosts(netns, "dual.example.test")[0] == {"198.51.100.3", "2001:db8:53::3"}


RESTART_CLIENT = """
import os, socket, sys, time
go, done = sys.argv[1], sys.argv[2]
def ask():
    try:
        return sorted({a[4][0] for a in socket.getaddrinfo("dual.example.test", None, 0, socket.SOCK_STREAM)})
    except socket.gaierror as e:
        return ["error %d" % e.errno]
deadline = time.monotonic() + 60
while not os.path.exists(go) and time.monotonic() < deadline:
    print("phase1", *ask(), flush=True)
    time.sleep(0.05)
for _ in range(20):
    print("phase2", *ask(), flush=True)
open(done, "w").close()
"""


def test_long_running_process_follows_a_daemon_restart(netns, nss_daemon, dns_nsd, tmp_path):
    """One process keeps resolving while the daemon stops and starts again on the same paths:
    it gets answers throughout (from dns while no daemon runs) and, once the new daemon is up,
    from the new daemon's map, not from its socket."""
    first = nss_daemon()
    script = tmp_path / "client.py"
    script.write_text(RESTART_CLIENT)
    go, done = tmp_path / "go", tmp_path / "done"
    proc = netns.popen(["/usr/bin/python3", str(script), str(go), str(done)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        assert first.daemon.stop() == 0
        time.sleep(1.0)
        second = nss_daemon(same_paths_as=first)
        time.sleep(2.0)  # the module looks at a dead map again within a second
        before = second.stats()["nss_requests"]
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    lines = [l.split() for l in out.splitlines()]
    assert done.exists(), err
    good = {("192.0.2.3", "2001:db8::3"), ("198.51.100.3", "2001:db8:53::3")}  # nscache, or dns
    assert all(tuple(l[1:]) in good for l in lines), out
    phase2 = [tuple(l[1:]) for l in lines if l[0] == "phase2"]
    assert phase2 == [("192.0.2.3", "2001:db8::3")] * 20, out
    assert second.stats()["nss_requests"] - before <= 1, "the process did not reopen the new map"


def test_negative_answers_come_from_the_map(netns, nss_build, nssd):
    asks = [("gethostbyname4_r", "nx.example.test", "0", HOST_NOT_FOUND),
            ("gethostbyname3_r", "nx.example.test", "4", HOST_NOT_FOUND),
            ("gethostbyname3_r", "www.example.test", "6", NO_DATA)]  # no AAAA for an A-only name
    for fn, name, fam, herrno in asks:
        r = direct(netns, nss_build, fn, name + ".", fam)
        assert (r.status, r.herrno) == (NSS_NOTFOUND, herrno), (fn, name, r)
    before = nssd.stats()
    upstream_before = nssd.upstream.count()
    for _ in range(3):
        for fn, name, fam, herrno in asks:
            r = direct(netns, nss_build, fn, name + ".", fam)
            assert (r.status, r.herrno) == (NSS_NOTFOUND, herrno), (fn, name, r)
    after = nssd.stats()
    assert after.get("nss_requests") == before.get("nss_requests"), "a negative answer went to the socket"
    assert nssd.upstream.count() == upstream_before
    # the AF_UNSPEC lookup of an IPv4-only name is one map hit too
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test.")
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test.")
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.1"], r
    assert nssd.stats().get("nss_requests") == before.get("nss_requests") + 1


def test_map_hits_need_no_socket(netns, nss_build, nssd):
    r = client(netns, nss_build, "gai", "dual.example.test", "0")
    assert sorted(r.values("addr")) == ["192.0.2.3", "2001:db8::3"]
    c = PausedClient(netns, nss_build, 20, "dual.example.test", "0")  # has the map now
    away = nssd.socket_path.with_name("moved-away.sock")
    nssd.socket_path.rename(away)
    try:
        r = c.resume()
        assert r.value("ok") == "20" and "2001:db8::3" in r.out, r
    finally:
        away.rename(nssd.socket_path)


def test_map_hits_make_no_system_call(netns, nss_build, nssd):
    """After the first lookup (which asks for the map and the name), the same lookup is a map
    hit: a hash, a copy and a clock read in the vDSO, nothing the kernel sees."""
    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    # LeakSanitizer (an ASan build of the client) cannot run under ptrace: off for this one.
    r = netns.run(["strace", "-f", "-qq", "-e", "trace=all", "--", str(nss_build.client), "hits",
                   str(nss_build.module), "200", "dual.example.test."],
                  env={"ASAN_OPTIONS": "detect_leaks=0"})
    assert r.returncode == 0 and "ok 200" in r.stdout, r.stdout + r.stderr
    trace = r.stderr.splitlines()
    marks = [i for i, l in enumerate(trace) if 'write(1, "--\\n"' in l]
    assert len(marks) == 2, r.stderr
    # resolv.conf is looked at once a second at most (search_list.c): allowed between marks
    between = [l for l in trace[marks[0] + 1:marks[1]] if "resolv.conf" not in l]
    assert between == [], between


def test_map_descriptor_is_sealed(nssd):
    """What the socket hands every process: readable, but nobody can truncate it (SIGBUS in
    every reader), grow it, write it or map it writable."""
    fields, size, fd = p.get_map(nssd.socket_path)
    assert fd is not None, fields
    try:
        assert fields[2] == p.FOUND and size == os.fstat(fd).st_size
        assert fcntl.fcntl(fd, fcntl.F_GET_SEALS) & p.MAP_SEALS == p.MAP_SEALS
        for new_size in (0, size // 2, size * 2):
            with pytest.raises(PermissionError):
                os.ftruncate(fd, new_size)
        with pytest.raises(PermissionError):
            mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        with pytest.raises(PermissionError):
            os.pwrite(fd, b"x", 0)
        ro = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
        magic, version, _, _, live, _, map_id = p.HEADER.unpack(ro[:p.HEADER.size])[:7]
        assert (magic, version, live, map_id) == (p.MAP_MAGIC, p.VERSION, 1, fields[6])
        ro.close()
    finally:
        os.close(fd)


def test_flush_reaches_the_map(netns, nss_build, nssd):
    _set_a(nssd.upstream, "flushme.example.test.", 300, "192.0.2.80")
    assert client(netns, nss_build, "gai", "flushme.example.test", "4").values("addr") == ["192.0.2.80"]
    _set_a(nssd.upstream, "flushme.example.test.", 300, "192.0.2.81")
    assert client(netns, nss_build, "gai", "flushme.example.test", "4").values("addr") == ["192.0.2.80"]
    nssd.daemon.flush()
    assert client(netns, nss_build, "gai", "flushme.example.test", "4").values("addr") == ["192.0.2.81"]


def test_answer_looked_up_before_a_flush_is_not_served_after_it(netns, nss_build, nssd, tmp_path):
    """An AF_UNSPEC request whose A comes from the cache and whose AAAA waits for the upstream:
    a flush while it waits must invalidate what the request publishes when it finishes, or
    the A from before the flush is served from the map after it."""
    name = "racy.example.test."
    _set_a(nssd.upstream, name, 300, "192.0.2.90")
    nssd.upstream.add(name, "AAAA", 300, "2001:db8::90")
    assert client(netns, nss_build, "gai", "racy.example.test", "4").values("addr") == ["192.0.2.90"]
    _set_a(nssd.upstream, name, 300, "192.0.2.91")
    nssd.upstream.delays[name] = 1500
    asked = nssd.upstream.count(name=name)
    proc = netns.popen([str(nss_build.client), "gai", "racy.example.test", "0"], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 10
        while nssd.upstream.count(name=name) == asked and time.monotonic() < deadline:
            time.sleep(0.02)
        assert nssd.upstream.count(name=name) > asked, "the AAAA query never reached the upstream"
        nssd.daemon.flush()  # while the AAAA is delayed; the A was read from the cache already
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    assert "192.0.2.90" in out, out  # looked up before the flush: fine to answer once
    nssd.upstream.delays.pop(name)
    r = client(netns, nss_build, "gai", "racy.example.test", "0")
    assert sorted(r.values("addr")) == ["192.0.2.91", "2001:db8::90"], r


STRESS_NAMES = 120


def _stress_records():
    records = []
    for n in range(STRESS_NAMES):
        ttl = n % 3 + 1  # short TTLs: entries expire during the run
        records.append((f"bulk{n}.example.test.", "A", ttl, [f"198.18.{n // 250}.{n % 250 + 1}"]))
        if n % 2 == 0:
            records.append((f"bulk{n}.example.test.", "AAAA", ttl, [f"2001:db8:ff::{n + 1:x}"]))
    return records


def test_stress_threads_and_processes(netns, nss_build, nss_daemon, dns_nsd):
    """2 processes x 2 threads through getaddrinfo/gethostbyname_r with `hosts: nscache` only,
    while the daemon inserts, evicts (64K cache), expires (1-3 s TTLs) and flushes (every
    1.5 s); every answer is checked against the zone (tests/nss/nss_stress.c)."""
    if not nss_build.stress.exists():
        pytest.skip("nss_stress not built")
    d = nss_daemon(extra_args=["--cache-size", "64K"], records=_stress_records())
    only = netns.nsswitch_file("nscache")
    stop = threading.Event()
    flushes = []

    def flusher():
        while not stop.wait(1.5):
            d.daemon.flush()
            flushes.append(1)

    t = threading.Thread(target=flusher, daemon=True)
    t.start()
    try:
        r = netns.run([str(nss_build.stress), str(STRESS_NAMES), "8", "2", "2"], nsswitch=only, timeout=120)
    finally:
        stop.set()
        t.join(timeout=10)
    assert r.returncode == 0, f"{r.stdout}\n{r.stderr}"
    stats = d.stats()
    print(r.stdout, {k: stats.get(k) for k in ("nss_requests", "evictions", "expirations", "cache_entries")},
          f"flushes {len(flushes)}")
    counts = dict(zip(r.stdout.split()[0::2], map(int, r.stdout.split()[1::2])))
    lookups = counts["ok"] + counts["nodata"] + counts["again"]
    assert len(flushes) >= 3
    # both paths ran: the socket (misses) and the map (hits: fewer requests than lookups)
    assert 0 < stats.get("nss_requests", 0) < lookups
