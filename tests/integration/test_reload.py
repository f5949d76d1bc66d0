# SPDX-License-Identifier: BSD-3-Clause
"""Living with the daemon (issue 10): reload without losing the cache or a query, upstreams
that follow resolv.conf, split DNS, names kept local (RFC 6761, RFC 6303), CHAOS answered by
nscache itself, local records."""

import os
import shutil
import signal
import socket
import subprocess
import threading
import time

import dns.message
import dns.query
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import pytest

from dnshelpers import a_addrs, wait_until


def ask(port, name, rdtype="A", rdclass="IN", timeout=3.0):
    q = dns.message.make_query(name, rdtype, rdclass, use_edns=0)
    return dns.query.udp(q, "127.0.0.1", port=port, timeout=timeout)


def write_config(d, text):
    path = d.workdir / "nscache.toml"
    tmp = d.workdir / "nscache.toml.new"
    tmp.write_text(text)
    os.rename(tmp, path)


def reload(d, nscache):
    return subprocess.run([nscache, "reload", "--control", d.control], capture_output=True,
                          text=True, timeout=30)


def test_reload_switches_upstreams_without_losing_queries_or_the_cache(daemon, make_fake, nscache):
    old, new = make_fake(), make_fake()
    for f, last in ((old, 1), (new, 2)):
        for i in range(40):
            f.add(f"n{i}.fake.test.", "A", 300, f"192.0.2.{last}")
    d = daemon([], config=f'upstream = ["{old.addr}"]\n')
    for i in range(10):
        assert a_addrs(ask(d.port, f"n{i}.fake.test")) == ["192.0.2.1"]
    hits_before = d.stats()["cache_hits"]
    lost, answered = [], []
    stop = threading.Event()

    def load():
        i = 0
        while not stop.is_set():
            name = f"n{i % 10}.fake.test"  # cached names
            try:
                r = ask(d.port, name, timeout=2)
                answered.append(r.rcode())
            except Exception as e:  # noqa: BLE001 - any loss counts
                lost.append((name, repr(e)))
            i += 1

    t = threading.Thread(target=load)
    t.start()
    try:
        time.sleep(0.5)
        write_config(d, f'upstream = ["{new.addr}"]\n')
        r = reload(d, nscache)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "reloaded" in r.stdout
        time.sleep(0.5)
    finally:
        stop.set()
        t.join(10)
    assert not lost, lost[:5]
    assert answered and all(rc == dns.rcode.NOERROR for rc in answered)
    # The cache was kept: cached names still come from it (old answers), the hit count grew.
    assert a_addrs(ask(d.port, "n3.fake.test")) == ["192.0.2.1"]
    assert d.stats()["cache_hits"] > hits_before + len(answered) - 5
    assert new.count("udp", "n3.fake.test.") == 0
    # A new name goes to the new upstream.
    assert a_addrs(ask(d.port, "n30.fake.test")) == ["192.0.2.2"]
    assert old.count("udp", "n30.fake.test.") == 0
    assert wait_until(lambda: "nscache.toml reloaded: changed upstream" in d.stderr_text(), timeout=5)


def test_reload_changes_allow_and_ttl_clamps_and_sighup_works(daemon, fake_upstream, nscache):
    fake_upstream.add("clamp.fake.test.", "A", 3000, "192.0.2.5")
    fake_upstream.add("later.fake.test.", "A", 3000, "192.0.2.6")
    base = f'upstream = ["{fake_upstream.addr}"]\n'
    d = daemon([], config=base)
    assert ask(d.port, "clamp.fake.test").answer[0].ttl == 3000
    write_config(d, base + "max-ttl = 60\n")
    os.kill(d.pid, signal.SIGHUP)
    assert wait_until(lambda: "reloaded: changed max-ttl" in d.stderr_text(), timeout=5)
    assert ask(d.port, "later.fake.test").answer[0].ttl <= 60
    write_config(d, base + 'allow = ["192.0.2.0/24"]\n')
    assert reload(d, nscache).returncode == 0
    assert ask(d.port, "clamp.fake.test").rcode() == dns.rcode.REFUSED
    write_config(d, base)
    assert reload(d, nscache).returncode == 0
    assert a_addrs(ask(d.port, "clamp.fake.test")) == ["192.0.2.5"]


def test_bad_config_on_reload_is_refused_and_the_old_one_stays(daemon, fake_upstream, nscache):
    fake_upstream.add("keep.fake.test.", "A", 300, "192.0.2.7")
    d = daemon([], config=f'upstream = ["{fake_upstream.addr}"]\n')
    write_config(d, f'upstream = ["{fake_upstream.addr}"]\nmax-ttl = "soon"\n')
    r = reload(d, nscache)
    assert r.returncode == 1
    assert "nscache.toml:2:" in r.stderr and "max-ttl" in r.stderr, r.stderr
    assert wait_until(lambda: "keeping the running configuration" in d.stderr_text(), timeout=5)
    assert "nscache.toml:2:" in d.stderr_text()
    assert a_addrs(ask(d.port, "keep.fake.test")) == ["192.0.2.7"]


def test_config_replaced_by_a_fifo_is_refused_and_sigterm_still_works(daemon, fake_upstream,
                                                                       nscache):
    """A FIFO blocked the reload on the thread that reads signals: SIGHUP and SIGTERM were
    never read again and the daemon needed SIGKILL. It is refused without being opened for
    long; the fixture's SIGTERM at teardown must still end the daemon with exit code 0."""
    fake_upstream.add("keep.fake.test.", "A", 300, "192.0.2.7")
    d = daemon([], config=f'upstream = ["{fake_upstream.addr}"]\n')
    path = d.workdir / "nscache.toml"
    os.unlink(path)
    os.mkfifo(path)
    r = subprocess.run([nscache, "reload", "--control", d.control], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nscache.toml: cannot read: not a regular file (a FIFO)" in r.stderr, r.stderr
    os.kill(d.pid, signal.SIGHUP)
    assert wait_until(lambda: d.stderr_text().count("not a regular file (a FIFO)") >= 2,
                      timeout=5), d.stderr_text()
    assert a_addrs(ask(d.port, "keep.fake.test")) == ["192.0.2.7"]
    assert d.stop() == 0


def test_options_that_need_a_restart_are_named(daemon, fake_upstream, nscache):
    d = daemon([], config=f'upstream = ["{fake_upstream.addr}"]\n')
    write_config(d, f'upstream = ["{fake_upstream.addr}"]\nedns-buffer-size = 4096\n')
    assert reload(d, nscache).returncode == 0
    assert wait_until(lambda: "edns-buffer-size changed but needs a restart" in d.stderr_text(),
                      timeout=5)


NSCD_DATABASE_KEYS = {"nscd-other-databases": '"decline"', "nscd-passwd": '"proxy"',
                      "nscd-group": '"decline"', "nscd-services": '"cache"', "nscd-netgroup": '"decline"',
                      "nscd-positive-ttl": '"60s"', "nscd-negative-ttl": '"5s"'}


def test_nscd_database_keys_need_a_restart_and_say_so(daemon, fake_upstream, nscache):
    """Issue 18's keys are read once at start (the pool, the maps, the plans): a SIGHUP that
    changes one keeps the running value and says so, never silently."""
    d = daemon([], config=f'upstream = ["{fake_upstream.addr}"]\n')
    changed = "".join(f"{k} = {v}\n" for k, v in NSCD_DATABASE_KEYS.items())
    write_config(d, f'upstream = ["{fake_upstream.addr}"]\n{changed}')
    os.kill(d.pid, signal.SIGHUP)
    for key in NSCD_DATABASE_KEYS:
        assert wait_until(lambda key=key: f"{key} changed but needs a restart" in d.stderr_text(),
                          timeout=5), (key, d.stderr_text())


# --------------------------------------------------------------------------------------
# Upstreams that follow resolv.conf
# --------------------------------------------------------------------------------------

def _in_namespace_with_etc(etc):
    """A wrapper that runs the daemon in a private mount namespace whose /etc is `etc`."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare for a private mount namespace")
    return ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
            f'mount --bind "{etc}" /etc && exec "$0" "$@"']


@pytest.mark.parametrize("how", ["rename", "symlink"])
def test_resolv_conf_change_switches_upstreams_within_a_second(daemon, make_fake, tmp_path, how):
    old, new = make_fake(), make_fake()
    old.add("which.fake.test.", "A", 1, "192.0.2.11")
    new.add("which.fake.test.", "A", 1, "192.0.2.22")
    etc = tmp_path / "etc"
    run = tmp_path / "run"
    etc.mkdir()
    run.mkdir()

    # nscache reads a port from resolv.conf too (host:port is what the fakes need).
    text_old = f"# test\nnameserver {old.addr}\n"
    text_new = f"# test\nnameserver {new.addr}\n"
    if how == "rename":
        (etc / "resolv.conf").write_text(text_old)
    else:
        (run / "a.conf").write_text(text_old)
        os.symlink(run / "a.conf", etc / "resolv.conf")
    # The path is the namespace's /etc/resolv.conf, which this test wrote (never the host's).
    d = daemon([], config='resolv-file = "/etc/resolv.conf"\nserve-stale = false\n',
               wrapper=_in_namespace_with_etc(etc))
    assert a_addrs(ask(d.port, "which.fake.test")) == ["192.0.2.11"]
    if how == "rename":
        (etc / "resolv.conf.new").write_text(text_new)
        os.rename(etc / "resolv.conf.new", etc / "resolv.conf")
    else:
        (run / "b.conf").write_text(text_new)
        os.symlink(run / "b.conf", etc / "resolv.conf.tmp")
        os.rename(etc / "resolv.conf.tmp", etc / "resolv.conf")
    # Seen by the file watch (the timeout only guards against a hang).
    assert wait_until(lambda: "upstreams from /etc/resolv.conf changed" in d.stderr_text(), timeout=10)
    time.sleep(1.1)  # the 1 s TTL runs out
    assert a_addrs(ask(d.port, "which.fake.test")) == ["192.0.2.22"]


def test_reload_with_a_new_forward_flushes_what_was_cached_for_it(daemon, make_fake, nscache):
    public, corp = make_fake(), make_fake()
    public.add("www.corp.test.", "A", 300, "192.0.2.1")
    corp.add("www.corp.test.", "A", 300, "10.0.0.1")
    base = f'upstream = ["{public.addr}"]\n'
    d = daemon([], config=base)
    assert a_addrs(ask(d.port, "www.corp.test")) == ["192.0.2.1"]  # cached from the public side
    write_config(d, base + f'\n[[forward]]\ndomains = ["corp.test"]\nupstreams = ["{corp.addr}"]\n')
    assert reload(d, nscache).returncode == 0
    assert a_addrs(ask(d.port, "www.corp.test")) == ["10.0.0.1"]
    assert corp.count(name="www.corp.test.") == 1


def test_query_in_flight_across_a_reload_is_answered(daemon, make_fake, nscache):
    old, new = make_fake(), make_fake()
    old.add("slow.fake.test.", "A", 300, "192.0.2.8")
    old.delay_ms = 800
    d = daemon([], config=f'upstream = ["{old.addr}"]\n')
    result = {}

    def asker():
        result["r"] = ask(d.port, "slow.fake.test", timeout=5)

    t = threading.Thread(target=asker)
    t.start()
    assert wait_until(lambda: old.count() >= 1, timeout=3)
    write_config(d, f'upstream = ["{new.addr}"]\n')
    assert reload(d, nscache).returncode == 0
    t.join(10)
    assert a_addrs(result["r"]) == ["192.0.2.8"]  # the old route's answer, relayed
    # ...but not kept: the next asks the new upstream.
    new.add("slow.fake.test.", "A", 300, "192.0.2.9")
    assert a_addrs(ask(d.port, "slow.fake.test")) == ["192.0.2.9"]
