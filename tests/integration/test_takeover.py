# SPDX-License-Identifier: BSD-3-Clause
"""`nscache serve --takeover` (issue 20, item 3): a new instance takes the running one's
sockets, lock and cache over its control socket, then the old one drains and exits."""

import os
import shutil
import socket
import subprocess
import tempfile
import time

import pytest

from dnshelpers import a_addrs, udp
from harness import ZONE
from paced_load import PacedLoad, answer_for

LOAD_ZONE = "load.test"


def same_paths(first, port):
    """extra_args giving a second daemon the first one's control and NSS sockets."""
    return ["--control", first.control, "--nss-socket", str(first.workdir / "nss.sock")]


def successor(daemon, first, upstream, port, *more):
    """A `serve --takeover` of `first`, with its paths and port."""
    d = daemon(upstream, listen=(f"127.0.0.1:{port}",),
               extra_args=same_paths(first, port) + ["--takeover", *more])
    d.control = first.control  # the socket it serves now
    return d


def wait_exit(d, timeout):
    try:
        return d.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


def test_takeover_under_load_loses_no_query_and_keeps_the_cache(daemon, fake_upstream):
    fake_upstream.generator = lambda qname, rdtype: answer_for(qname, rdtype, LOAD_ZONE)
    fake_upstream.delay_ms = 200
    old = daemon(fake_upstream.addr)
    port = old.port
    # Warm the cache: every cached name once.
    warm = PacedLoad(port, LOAD_ZONE, cached=1000, rate=2000, miss_every=10**9, duration=0.6)
    warm.start().join()
    assert not warm.unanswered and not warm.wrong, (warm.unanswered[:5], warm.wrong[:5])

    load = PacedLoad(port, LOAD_ZONE, cached=1000, rate=3000, miss_every=50, duration=7.0).start()
    time.sleep(2.0)
    fake_upstream.clear_queries()
    new = successor(daemon, old, fake_upstream.addr, port)
    ready_at = time.monotonic()
    old.stopped_by_test = True  # it exits by itself: checked below
    load.join()

    assert load.errors == [], load.errors[:5]
    assert load.unanswered == [], f"{len(load.unanswered)} unanswered: {load.unanswered[:10]}"
    assert load.late == [], f"answered after 2 s: {load.late[:10]}"
    assert load.wrong == [], load.wrong[:10]
    assert load.answered == load.sent
    # The new instance's first second: the cached names come from the cache it was handed.
    first_second = {q["name"] for q in fake_upstream.queries
                    if q["name"] and q["name"].startswith("c") and q["time"] < ready_at + 1.0}
    asked = {label for t, label in load.answer_times
             if ready_at <= t < ready_at + 1.0 and label.startswith("c")}
    assert len(asked) > 500, f"only {len(asked)} cached names asked in the new one's first second"
    assert len(first_second) <= 0.05 * len(asked), \
        f"{len(first_second)} of {len(asked)} cached names went upstream: {sorted(first_second)[:10]}"
    # The old one exits by itself, cleanly.
    assert wait_exit(old, 15) == 0, old.stderr_text()
    text = old.stderr_text()
    assert "takeover: the new instance serves; draining" in text
    assert "shutting down (taken over)" in text
    assert "takeover: the previous instance drains" in new.stderr_text()
    # The new one serves on, the control socket included, and the paths are still there.
    assert a_addrs(udp(port, f"c7.{LOAD_ZONE}")) == ["10.1.0.7"]
    assert new.stats()["queries"] > 0
    assert os.path.exists(old.control) and os.path.exists(old.workdir / "nss.sock")


def test_after_a_takeover_a_plain_second_instance_is_still_refused(daemon, nsd):
    old = daemon(nsd.addr)
    port = old.port
    new = successor(daemon, old, nsd.addr, port)
    old.stopped_by_test = True
    assert wait_exit(old, 15) == 0, old.stderr_text()
    # The lock passed with its file: it names the new owner, and never had none.
    third = daemon(nsd.addr, expect_ready=False, extra_args=same_paths(old, port))
    assert wait_exit(third, 10) == 1
    third.stopped_by_test = True
    assert f"pid {new.pid}" in third.stderr_text() and "another nscache" in third.stderr_text()
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    # And a later takeover works from the new one as it did from the first.
    newer = successor(daemon, new, nsd.addr, port)
    new.stopped_by_test = True
    assert wait_exit(new, 15) == 0, new.stderr_text()
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert newer.stats()["queries"] >= 1


def test_takeover_with_no_running_instance_starts_as_a_first_one(daemon, nsd):
    d = daemon(nsd.addr, extra_args=["--takeover"])
    assert "no instance answers on" in d.stderr_text()
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]


def ask_takeover(control, user=None, close_after_offer=True):
    """The raw request, as a client (optionally as another user): (reply text, fds)."""
    code = (
        "import socket, sys\n"
        "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
        "s.settimeout(10)\n"
        f"s.connect({str(control)!r})\n"
        "s.sendall(b'takeover\\n')\n"
        "msg, fds, flags, addr = socket.recv_fds(s, 65536, 250)\n"
        "sys.stdout.write(repr((msg[:8], len(fds))))\n"
    )
    wrapper = ["setpriv", f"--reuid={user[0]}", f"--regid={user[1]}", f"--groups={user[1]}"] if user else []
    return subprocess.run(wrapper + ["/usr/bin/python3", "-c", code], capture_output=True, text=True, timeout=20)


def test_a_control_group_member_may_not_take_over(daemon, nsd, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (setpriv)")
    # nogroup's members may use the control socket (stats, flush), not take it over.
    import grp
    group = grp.getgrnam("nogroup")
    # A control socket the other user can reach (pytest's folders are root's alone).
    folder = tempfile.mkdtemp(prefix="nscache-takeover-")
    try:
        os.chmod(folder, 0o755)
        control = os.path.join(folder, "control.sock")
        d = daemon(nsd.addr, config='control-group = "nogroup"\n', extra_args=["--control", control])
        d.control = control
        stats = subprocess.run(["setpriv", "--reuid=65534", f"--regid={group.gr_gid}",
                                f"--groups={group.gr_gid}", d.binary, "stats", "--control", control],
                               capture_output=True, text=True, timeout=15)
        assert stats.returncode == 0, stats.stdout + stats.stderr  # a member may use it
        r = ask_takeover(control, user=(65534, group.gr_gid))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert r.returncode == 0, r.stderr
    assert "b'error: p'" in r.stdout and ", 0)" in r.stdout, r.stdout
    assert "takeover refused: permission denied" in d.stderr_text()
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_an_abandoned_takeover_leaves_the_running_instance_serving(daemon, nsd):
    d = daemon(nsd.addr)
    # A client that takes the offer and goes away without saying it serves.
    r = ask_takeover(d.control)
    assert r.returncode == 0, r.stderr
    assert "b'NSCTAKE1'" in r.stdout, r.stdout
    deadline = time.monotonic() + 5
    while "takeover abandoned" not in d.stderr_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "takeover abandoned" in d.stderr_text()
    assert d.proc.poll() is None
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert d.stats()["queries"] >= 1
