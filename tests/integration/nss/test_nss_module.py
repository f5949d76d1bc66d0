# SPDX-License-Identifier: BSD-3-Clause
"""libnss_nscache.so.2 against a fake daemon (nssfake.py): the module's own rules, exactly,
whatever the real daemon does. Every client runs in the test namespaces (nsenv.py) with
`hosts: files nscache`, so only /etc/hosts or the module can answer, except where a test
says otherwise."""

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

import nssproto as p
from nssclient import (EACCES, ECONNREFUSED, EAGAIN, ENOENT, ERANGE, HOST_NOT_FOUND, NETDB_INTERNAL, NO_DATA,
                       NO_RECOVERY, NSS_NOTFOUND, NSS_SUCCESS, NSS_TRYAGAIN, NSS_UNAVAIL, TRY_AGAIN,
                       PausedClient, client, direct, getent, getent_ahosts, getent_hosts, py_getaddrinfo)
from nssfake import Answer


@pytest.fixture
def only_module(netns):
    return netns.nsswitch_file("files nscache")


@pytest.fixture
def zone(fake_nss):
    f = fake_nss
    f.host("www.example.test", v4=["192.0.2.1"])
    f.host("v6only.example.test", v6=["2001:db8::6"])
    f.host("dual.example.test", v4=["192.0.2.3"], v6=["2001:db8::3"])
    f.host("alias.example.test", canon="www.example.test", aliases=["alias.example.test"], v4=["192.0.2.1"])
    f.host("multi.example.test", v4=["192.0.2.11", "192.0.2.12", "192.0.2.13"])
    f.host("host.sub.example.test", v4=["192.0.2.21"])
    f.addr("192.0.2.1", Answer(p.FOUND, 60, "www.example.test", ["web.example.test"], ["192.0.2.1"]))
    f.addr("2001:db8::3", Answer(p.FOUND, 60, "dual.example.test", [], [], ["2001:db8::3"]))
    return f


# ---- answers through glibc ---------------------------------------------------------------

def test_getent_hosts_families(netns, zone, only_module):
    assert getent_hosts(netns, "www.example.test", only_module) == ("192.0.2.1", ["www.example.test"])
    assert getent_hosts(netns, "v6only.example.test", only_module) == ("2001:db8::6", ["v6only.example.test"])
    # getent hosts asks AF_INET6 first
    assert getent_hosts(netns, "dual.example.test", only_module) == ("2001:db8::3", ["dual.example.test"])
    assert getent_hosts(netns, "alias.example.test", only_module) == \
        ("192.0.2.1", ["www.example.test", "alias.example.test"])
    assert getent_hosts(netns, "missing.example.test", only_module) is None


def test_getent_ahosts_families(netns, zone, only_module):
    assert getent_ahosts(netns, "www.example.test", only_module) == ({"192.0.2.1"}, "www.example.test")
    assert getent_ahosts(netns, "v6only.example.test", only_module) == ({"2001:db8::6"}, "v6only.example.test")
    assert getent_ahosts(netns, "dual.example.test", only_module) == \
        ({"192.0.2.3", "2001:db8::3"}, "dual.example.test")
    assert getent_ahosts(netns, "alias.example.test", only_module) == ({"192.0.2.1"}, "www.example.test")
    assert getent_ahosts(netns, "multi.example.test", only_module)[0] == {"192.0.2.11", "192.0.2.12", "192.0.2.13"}
    assert getent_ahosts(netns, "missing.example.test", only_module) is None
    # AF_UNSPEC is one request (gethostbyname4_r), not one per family
    assert [r[1] for r in zone.requests_for("dual.example.test")] == [p.AF_UNSPEC]


def test_c_client_each_family(netns, nss_build, zone, only_module):
    r = client(netns, nss_build, "gai", "dual.example.test", "4", nsswitch=only_module)
    assert r.values("addr") == ["192.0.2.3"] and r.value("canon") == "dual.example.test", r
    r = client(netns, nss_build, "gai", "dual.example.test", "6", nsswitch=only_module)
    assert r.values("addr") == ["2001:db8::3"], r
    r = client(netns, nss_build, "gai", "dual.example.test", "0", nsswitch=only_module)
    assert sorted(r.values("addr")) == ["192.0.2.3", "2001:db8::3"], r
    r = client(netns, nss_build, "gai", "v6only.example.test", "4", nsswitch=only_module)
    assert r.rc != 0 and r.lines[0].startswith("error"), r
    r = client(netns, nss_build, "gethostbyname", "alias.example.test", nsswitch=only_module)
    assert r.value("name") == "www.example.test" and r.values("alias") == ["alias.example.test"], r
    assert r.values("addr") == ["192.0.2.1"], r
    r = client(netns, nss_build, "byname", "multi.example.test", "4", nsswitch=only_module)
    assert r.values("addr") == ["192.0.2.11", "192.0.2.12", "192.0.2.13"], r
    r = client(netns, nss_build, "byname", "v6only.example.test", "6", nsswitch=only_module)
    assert r.value("family") == "6" and r.values("addr") == ["2001:db8::6"], r


def test_python_getaddrinfo(netns, zone, only_module):
    assert py_getaddrinfo(netns, "dual.example.test", 0, only_module) == ["192.0.2.3", "2001:db8::3"]
    assert py_getaddrinfo(netns, "dual.example.test", 2, only_module) == ["192.0.2.3"]
    assert py_getaddrinfo(netns, "dual.example.test", 10, only_module) == ["2001:db8::3"]
    assert "error" in py_getaddrinfo(netns, "missing.example.test", 0, only_module)


def test_by_address(netns, nss_build, zone, only_module):
    assert getent_hosts(netns, "192.0.2.1", only_module) == ("192.0.2.1", ["www.example.test", "web.example.test"])
    assert getent_hosts(netns, "2001:db8::3", only_module) == ("2001:db8::3", ["dual.example.test"])
    assert getent_hosts(netns, "192.0.2.99", only_module) is None
    r = client(netns, nss_build, "byaddr", "192.0.2.1", nsswitch=only_module)
    assert r.value("name") == "www.example.test" and r.values("addr") == ["192.0.2.1"], r
    # An IPv4-mapped IPv6 address is asked as the IPv4 address, as glibc's dns module does.
    zone.clear()
    r = direct(netns, nss_build, "gethostbyaddr2_r", "::ffff:192.0.2.1")
    assert r.status == NSS_SUCCESS and r.value("family") == "4" and r.value("name") == "www.example.test", r
    assert [(q[0], q[1]) for q in zone.requests] in ([], [(p.BY_ADDR, p.AF_INET)])


def test_hosts_file_comes_first(netns, zone, only_module):
    assert getent_ahosts(netns, "fromfiles.example.test", only_module)[0] == {"192.0.2.250"}
    assert zone.requests_for("fromfiles.example.test") == []
    # getent hosts asks AF_INET6 first: /etc/hosts has no IPv6 address, so nscache is asked
    # that one; the IPv4 answer comes from the file.
    assert getent_hosts(netns, "fromfiles.example.test", only_module)[0] == "192.0.2.250"
    assert [q[1] for q in zone.requests_for("fromfiles.example.test")] == [p.AF_INET6]


# ---- statuses, errno and h_errno (the module called directly) ----------------------------

def test_statuses(netns, nss_build, fake_nss):
    f = fake_nss
    f.host("a.example.test", v4=["192.0.2.1"])
    f.name("fail.example.test", p.AF_INET, Answer(p.TRYAGAIN, 0))
    f.name("odd.example.test", p.AF_INET, Answer(p.UNAVAIL, 0))
    r = direct(netns, nss_build, "gethostbyname3_r", "a.example.test", "4")
    assert (r.status, r.herrno) == (NSS_SUCCESS, 0) and r.value("canon") == "a.example.test", r
    assert 0 < int(r.value("ttl")) <= 60
    r = direct(netns, nss_build, "gethostbyname3_r", "nx.example.test.", "4")
    assert (r.status, r.errno, r.herrno) == (NSS_NOTFOUND, ENOENT, HOST_NOT_FOUND), r
    r = direct(netns, nss_build, "gethostbyname3_r", "a.example.test.", "6")
    assert (r.status, r.herrno) == (NSS_NOTFOUND, NO_DATA), r
    r = direct(netns, nss_build, "gethostbyname3_r", "fail.example.test.", "4")
    assert (r.status, r.errno, r.herrno) == (NSS_TRYAGAIN, EAGAIN, TRY_AGAIN), r
    r = direct(netns, nss_build, "gethostbyname3_r", "odd.example.test.", "4")
    assert (r.status, r.herrno) == (NSS_UNAVAIL, NO_RECOVERY), r
    r = direct(netns, nss_build, "gethostbyname3_r", "a.example.test", "0")  # AF_UNSPEC: not for 3_r
    assert r.status == NSS_UNAVAIL and r.herrno == NETDB_INTERNAL, r


def test_erange_on_short_buffers(netns, nss_build, zone, only_module):
    for fn, fam in (("gethostbyname3_r", "4"), ("gethostbyname4_r", "0")):
        r = direct(netns, nss_build, fn, "multi.example.test", fam, buflen=16)
        assert (r.status, r.errno, r.herrno) == (NSS_TRYAGAIN, ERANGE, NETDB_INTERNAL), (fn, r)
    r = direct(netns, nss_build, "gethostbyaddr2_r", "192.0.2.1", buflen=8)
    assert (r.status, r.errno) == (NSS_TRYAGAIN, ERANGE), r
    # glibc grows the buffer and calls again until it fits
    r = client(netns, nss_build, "byname_small", "alias.example.test", "4", nsswitch=only_module)
    assert int(r.value("erange")) > 0 and r.values("addr") == ["192.0.2.1"], r
    assert r.values("alias") == ["alias.example.test"], r


def test_daemon_down_is_unavail(netns, nss_build, tmp_path):
    env = {"NSCACHE_NSS_SOCKET": str(tmp_path / "none.sock")}
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test", env=env)
    assert (r.status, r.errno) == (NSS_UNAVAIL, ENOENT), r
    # a socket file nobody listens on: refused, also at once
    import socket
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(tmp_path / "dead.sock"))
    s.close()
    env["NSCACHE_NSS_SOCKET"] = str(tmp_path / "dead.sock")
    r = direct(netns, nss_build, "gethostbyname3_r", "www.example.test", "4", env=env)
    assert (r.status, r.errno) == (NSS_UNAVAIL, ECONNREFUSED), r


def test_daemon_down_dns_takes_over(netns, dns_nsd, tmp_path):
    """`hosts: files nscache dns` with no daemon: glibc's dns module answers (from the
    namespace's NSD, whose addresses are 198.51.100.x)."""
    env = {"NSCACHE_NSS_SOCKET": str(tmp_path / "none.sock")}
    r = getent(netns, "hosts", "www.example.test", env=env)
    assert r.rc == 0 and r.lines[0].split()[0] == "198.51.100.1", r
    r = getent(netns, "ahosts", "only-dns.example.test", env=env)
    assert r.rc == 0 and r.lines[0].split()[0] == "198.51.100.50", r


def test_daemon_that_never_answers_is_tryagain(netns, nss_build, fake_nss):
    fake_nss.hang = True
    # The module gives up by itself (after 5 s) and says TRYAGAIN; the 60 s only guard a hang.
    r = direct(netns, nss_build, "gethostbyname3_r", "slow.example.test.", "4", timeout=60)
    assert (r.status, r.herrno) == (NSS_TRYAGAIN, TRY_AGAIN), r


def test_bad_names_are_dropped(netns, nss_build, fake_nss):
    fake_nss.name("evil.example.test", p.AF_INET, Answer(p.FOUND, 60, "bad name;rm -rf", ["ok.example.test", "x\ty"],
                                                         ["192.0.2.66"]))
    r = direct(netns, nss_build, "gethostbyname3_r", "evil.example.test", "4")
    assert r.status == NSS_SUCCESS, r
    assert r.value("name") == "evil.example.test" and r.values("alias") == ["ok.example.test"], r
    # a payload whose lengths run past its end is not used
    fake_nss.name("broken.example.test", p.AF_INET, Answer(p.FOUND, 60, raw=b"\xff\x00abc"))
    r = direct(netns, nss_build, "gethostbyname3_r", "broken.example.test", "4")
    assert r.status == NSS_UNAVAIL and r.herrno == NO_RECOVERY, r


# ---- the search list (resolv.conf: search example.test sub.example.test, ndots:1) ---------

def asked(fake):
    return [q[2].decode() for q in fake.requests if q[0] == p.BY_NAME]


def test_search_list_unqualified(netns, nss_build, zone):
    # no dot: the search list first, then the name as is
    r = direct(netns, nss_build, "gethostbyname3_r", "www", "4")
    assert r.status == NSS_SUCCESS and r.value("name") == "www.example.test", r
    assert asked(zone) == ["www.example.test"]
    zone.clear()
    r = direct(netns, nss_build, "gethostbyname3_r", "host", "4")
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.21"], r
    assert asked(zone) == ["host.example.test", "host.sub.example.test"]
    zone.clear()
    r = direct(netns, nss_build, "gethostbyname3_r", "nothing", "4")
    assert (r.status, r.herrno) == (NSS_NOTFOUND, HOST_NOT_FOUND), r
    assert asked(zone) == ["nothing.example.test", "nothing.sub.example.test", "nothing"]


def test_search_list_dotted_and_absolute(netns, nss_build, zone):
    # dots >= ndots: as is first, then the search list
    r = direct(netns, nss_build, "gethostbyname3_r", "host.sub", "4")
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.21"], r
    assert asked(zone) == ["host.sub", "host.sub.example.test"]
    zone.clear()
    # a trailing dot: only the name itself
    r = direct(netns, nss_build, "gethostbyname3_r", "www.", "4")
    assert (r.status, r.herrno) == (NSS_NOTFOUND, HOST_NOT_FOUND), r
    assert asked(zone) == ["www"]
    zone.clear()
    # the h_errno of the as-is try wins when every candidate fails
    r = direct(netns, nss_build, "gethostbyname3_r", "www.example.test", "6")
    assert (r.status, r.herrno) == (NSS_NOTFOUND, NO_DATA), r
    assert asked(zone) == ["www.example.test", "www.example.test.example.test", "www.example.test.sub.example.test"]


def test_search_list_nodata_reported(netns, nss_build, zone):
    # one candidate has the name without IPv6, the others do not exist: NO_DATA
    r = direct(netns, nss_build, "gethostbyname3_r", "www", "6")
    assert (r.status, r.herrno) == (NSS_NOTFOUND, NO_DATA), r
    assert asked(zone) == ["www.example.test", "www.sub.example.test", "www"]


def test_search_list_follows_localdomain(netns, nss_build, zone):
    r = direct(netns, nss_build, "gethostbyname3_r", "host", "4", env={"LOCALDOMAIN": "sub.example.test"})
    assert r.status == NSS_SUCCESS, r
    assert asked(zone) == ["host.sub.example.test"]


def test_search_list_follows_resolv_conf_changes(netns, nss_build, zone):
    conf = netns.etc / "resolv.conf"
    old = conf.read_text()
    try:
        # rewritten in place: the bind mount keeps pointing at this inode
        with open(conf, "w") as fh:
            fh.write("nameserver 127.0.0.1\nsearch sub.example.test\noptions ndots:3\n")
        r = direct(netns, nss_build, "gethostbyname3_r", "host", "4")
        assert r.status == NSS_SUCCESS
        assert asked(zone) == ["host.sub.example.test"]
        zone.clear()
        # ndots:3: a name with two dots goes through the search list first
        r = direct(netns, nss_build, "gethostbyname3_r", "www.example.test", "4")
        assert r.status == NSS_SUCCESS
        assert asked(zone) == ["www.example.test.sub.example.test", "www.example.test"]
    finally:
        with open(conf, "w") as fh:
            fh.write(old)


# ---- the shared map ------------------------------------------------------------------------

def test_second_lookup_is_a_map_hit(netns, nss_build, zone):
    r = client(netns, nss_build, "repeat", 50, "gai", "dual.example.test", "0")
    assert r.rc == 0 and r.value("ok") == "50", r
    assert len(zone.requests_for("dual.example.test")) == 1, "only the first lookup may use the socket"
    # another process: the map is shared
    r = direct(netns, nss_build, "gethostbyname4_r", "dual.example.test")
    assert r.status == NSS_SUCCESS and sorted(r.values("addr")) == ["192.0.2.3", "2001:db8::3"], r
    assert len(zone.requests_for("dual.example.test")) == 1


def test_negative_answers_come_from_the_map(netns, nss_build, zone, only_module):
    for _ in range(2):
        r = direct(netns, nss_build, "gethostbyname3_r", "nx.example.test.", "4")
        assert (r.status, r.herrno) == (NSS_NOTFOUND, HOST_NOT_FOUND), r
        r = direct(netns, nss_build, "gethostbyname3_r", "www.example.test.", "6")
        assert (r.status, r.herrno) == (NSS_NOTFOUND, NO_DATA), r
    assert len(zone.requests_for("nx.example.test")) == 1
    assert len([q for q in zone.requests_for("www.example.test") if q[1] == p.AF_INET6]) == 1


def test_map_entries_expire(netns, nss_build, fake_nss):
    fake_nss.name("brief.example.test", p.AF_INET, Answer(p.FOUND, 1, "brief.example.test", [], ["192.0.2.77"]))
    assert direct(netns, nss_build, "gethostbyname3_r", "brief.example.test.", "4").status == NSS_SUCCESS
    assert direct(netns, nss_build, "gethostbyname3_r", "brief.example.test.", "4").status == NSS_SUCCESS
    assert len(fake_nss.requests_for("brief.example.test")) == 1
    time.sleep(1.2)
    fake_nss.name("brief.example.test", p.AF_INET, Answer(p.FOUND, 1, "brief.example.test", [], ["192.0.2.78"]))
    r = direct(netns, nss_build, "gethostbyname3_r", "brief.example.test.", "4")
    assert r.values("addr") == ["192.0.2.78"], r
    assert len(fake_nss.requests_for("brief.example.test")) == 2


def test_flush_invalidates_the_map(netns, nss_build, zone):
    assert direct(netns, nss_build, "gethostbyname3_r", "www.example.test.", "4").status == NSS_SUCCESS
    zone.map.flush()
    assert direct(netns, nss_build, "gethostbyname3_r", "www.example.test.", "4").status == NSS_SUCCESS
    assert len(zone.requests_for("www.example.test")) == 2


def test_map_answer_without_socket(netns, nss_build, fake_nss):
    """A slot the daemon published is answered with no request for it, and a process that holds
    the map keeps answering from it when the socket is gone: no connect."""
    fake_nss.map.put(p.BY_NAME, p.AF_INET, b"mapped.example.test", p.FOUND,
                     p.encode_payload("mapped.example.test", [], ["192.0.2.88"]), ttl_s=30)
    r = direct(netns, nss_build, "gethostbyname3_r", "mapped.example.test", "4")
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.88"], r
    assert 25 <= int(r.value("ttl")) <= 30, r
    c = PausedClient(netns, nss_build, 20, "mapped.example.test", "4")
    os.rename(fake_nss.sock_path, fake_nss.sock_path + ".away")
    try:
        r = c.resume()
        assert r.value("ok") == "20" and "192.0.2.88" in r.out, r
        # a new process cannot get the map without the socket: no daemon
        r = direct(netns, nss_build, "gethostbyname3_r", "mapped.example.test.", "4")
        assert r.status == NSS_UNAVAIL, r
    finally:
        os.rename(fake_nss.sock_path + ".away", fake_nss.sock_path)
    assert fake_nss.requests_for("mapped.example.test") == []


def test_map_of_a_stopped_daemon_is_not_used(netns, nss_build, fake_nss):
    fake_nss.map.put(p.BY_NAME, p.AF_INET, b"mapped.example.test", p.FOUND,
                     p.encode_payload("mapped.example.test", [], ["192.0.2.88"]), ttl_s=30)
    fake_nss.map.set_live(0)
    r = direct(netns, nss_build, "gethostbyname3_r", "mapped.example.test", "4")
    assert r.status == NSS_NOTFOUND, r  # asked the socket, whose table lacks the name
    assert len(fake_nss.requests_for("mapped.example.test")) == 1


def test_many_addresses_through_glibc(netns, fake_nss):
    """glibc passes errnop == &errno: an ERANGE the module reports must survive its return, or
    glibc never grows its buffer and a name with many addresses fails (getaddrinfo's first
    buffer holds about 24 tuples). `hosts: nscache` alone, so nothing else can answer."""
    many = [f"192.0.2.{100 + i}" for i in range(40)]
    fake_nss.host("many.example.test", v4=many)
    only = netns.nsswitch_file("nscache")
    got = getent_ahosts(netns, "many.example.test", only)
    assert got is not None and got[0] == set(many), got
    assert sorted(py_getaddrinfo(netns, "many.example.test", 2, only)) == sorted(many)
    r = getent(netns, "hosts", "many.example.test", nsswitch=only)
    assert r.rc == 0 and r.lines and set(r.lines[0].split()[1:]) >= {"many.example.test"}, r


# ---- what the module trusts ----------------------------------------------------------------

NOBODY = 65534


@pytest.fixture
def foreign_fake(netns):
    """nssfake.py run as another user (uid 65534) in a folder of its own: a socket anyone could
    have put at the path, answering www.example.test with 192.0.2.66."""
    workdir = Path(tempfile.mkdtemp(prefix="nscache-foreign-"))
    os.chmod(workdir, 0o755)
    os.chown(workdir, NOBODY, NOBODY)
    script = Path(__file__).with_name("nssfake.py")
    proc = subprocess.Popen(["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
                             "/usr/bin/python3", str(script), str(workdir)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().strip()
        assert line == "ready", f"fake daemon as uid {NOBODY}: {line!r} {proc.stderr.read() if proc.poll() else ''}"
        proc.sock_path = str(workdir / "fake-nss.sock")
        yield proc
    finally:
        from harness import stop_process
        if proc.poll() is None:
            try:
                proc.communicate("", timeout=5)
            except (subprocess.TimeoutExpired, ValueError):
                stop_process(proc)
        shutil.rmtree(workdir, ignore_errors=True)


def _fake_requests(proc):
    out, _ = proc.communicate("", timeout=10)  # closing its stdin stops it
    return [l for l in out.splitlines() if l.startswith("request")]


def test_daemon_of_another_user_is_not_trusted(netns, nss_build, dns_nsd, foreign_fake):
    """A socket whose listener is neither root nor the asking process's own user gets nothing
    asked of it and none of its answers used: UNAVAIL at once, so dns answers."""
    env = {"NSCACHE_NSS_SOCKET": foreign_fake.sock_path}
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test", env=env)
    assert (r.status, r.errno) == (NSS_UNAVAIL, EACCES), r
    r = getent(netns, "ahosts", "www.example.test", env=env)
    assert r.rc == 0 and {l.split()[0] for l in r.lines} == {"198.51.100.1"}, r  # from dns
    assert _fake_requests(foreign_fake) == [], "the module talked to an untrusted daemon"


def test_daemon_of_the_same_user_is_trusted(netns, nss_build, foreign_fake):
    """An unprivileged daemon serves its own user: a client running as that user uses it."""
    env = {"NSCACHE_NSS_SOCKET": foreign_fake.sock_path}
    r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test", env=env, user=NOBODY)
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.66"], r
    requests = _fake_requests(foreign_fake)
    assert requests and requests[0].split()[1] == str(p.GET_MAP), requests


@pytest.mark.parametrize("kind", ["fifo", "file"])
def test_fifo_or_file_at_the_socket_path_never_hangs(netns, nss_build, tmp_path, kind):
    """Whatever sits at the socket path (and where the map was once read from, the retired
    NSCACHE_NSS_MAP), a lookup answers UNAVAIL at once instead of hanging."""
    paths = [tmp_path / "nss.sock", tmp_path / "hosts.map"]
    for path in paths:
        if kind == "fifo":
            os.mkfifo(path)
        else:
            path.write_bytes(b"\0" * 4096)
    env = {"NSCACHE_NSS_SOCKET": str(paths[0]), "NSCACHE_NSS_MAP": str(paths[1])}
    try:
        r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test", env=env, timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"a lookup hung on a {kind} at the socket or map path")
    assert (r.status, r.errno) == (NSS_UNAVAIL, ECONNREFUSED), r

