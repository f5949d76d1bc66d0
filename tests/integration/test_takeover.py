# SPDX-License-Identifier: BSD-3-Clause
"""`nscache serve --takeover` (issue 20, item 3): a new instance takes the running one's
sockets, lock and cache over its control socket, then the old one drains and exits."""

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import dns.rrset
import pytest

from dnshelpers import a_addrs, udp, wait_until
from harness import ZONE
from steady_load import SteadyLoad, unanswered

def same_paths(first, port):
    """extra_args giving a second daemon the first one's control and NSS sockets."""
    return ["--control", first.control, "--nss-socket", str(first.workdir / "nss.sock")]


def successor(daemon, first, upstream, port, *more):
    """A `serve --takeover` of `first`, with its paths and port."""
    d = daemon(upstream, listen=(f"127.0.0.1:{port}",),
               extra_args=same_paths(first, port) + ["--takeover", *more])
    d.control = first.control  # the socket it serves now
    return d


def wait_for_log(d, text, timeout=5.0):
    """Whether `text` shows in d's log within `timeout` (its lines are read by a thread)."""
    deadline = time.monotonic() + timeout
    while text not in d.stderr_text():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_exit(d, timeout):
    try:
        return d.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        return None


CACHED = 1000
MISS_EVERY = 50  # one query in 50 is a name never asked before (through the 200 ms upstream)


def load_upstream(fake):
    """c<i> and m<i>.fake.test answer 198.51.x.y; every answer 200 ms late."""
    def generate(qname, rdtype):
        label = qname.labels[0].decode()
        if rdtype != 1 or label[:1] not in ("c", "m") or not label[1:].isdigit():
            return None
        return [dns.rrset.from_text(qname, 3600, "IN", "A", expected(qname.to_text())[0])]

    fake.generator = generate
    fake.delay_ms = 200


def expected(name):
    i = int(name.split(".")[0][1:])
    return [f"198.51.{i // 250 % 250}.{i % 250 + 1}"]


def pick(i):
    if i % MISS_EVERY == MISS_EVERY - 1:
        return f"m{i}.fake.test."
    return f"c{i % CACHED}.fake.test."


def test_takeover_under_load_loses_no_query_and_keeps_the_cache(daemon, fake_upstream):
    load_upstream(fake_upstream)
    old = daemon(fake_upstream.addr)
    port = old.port
    # Filled without the delay (a thread per delayed answer is more than a busy machine's
    # Python keeps up with at this pace: late answers would be cached as failures), checked
    # whole: every cached name must be a hit once the load starts.
    fake_upstream.delay_ms = 0
    warm = SteadyLoad(port, lambda i: f"c{i}.fake.test.", rate=1000, duration=CACHED / 1000).start()
    warmed = warm.join()
    missing = unanswered(warmed, within=3.0)
    assert not missing, f"{len(missing)} warm-up queries unanswered"
    assert all(q.rcode() == 0 for q in warmed), "a warm-up query failed"
    fake_upstream.delay_ms = 200
    fake_upstream.clear_queries()

    load = SteadyLoad(port, pick, rate=3000, duration=5.0).start()
    time.sleep(1.5)
    started = time.monotonic()
    new = successor(daemon, old, fake_upstream.addr, port)
    ready = time.monotonic()
    old.stopped_by_test = True  # it exits by itself: checked below
    queries = load.join()
    code = wait_exit(old, 15)
    old_log, new_log = old.stderr_text(), new.stderr_text()
    assert code == 0, old_log[-3000:]

    lost = unanswered(queries, within=2.0)
    assert not lost, (f"{len(lost)} of {len(queries)} queries unanswered within 2 s, first at "
                      f"{lost[0].sent - started:+.3f} s from the takeover's start\n"
                      f"old:\n{old_log[-2000:]}\nnew:\n{new_log[-2000:]}")
    assert load.errors == [], load.errors[:5]
    bad = [(q.name, q.rcode(), round(q.sent - started, 3), round(q.latency, 3))
           for q in queries if q.rcode() != 0]
    assert not bad, (f"answers not NOERROR (name, rcode, sent after the takeover's start, "
                     f"latency): {bad[:10]}\nold:\n{old_log[-3000:]}\nnew:\n{new_log[-3000:]}")
    # Misses in flight when the old one drained, and every other, carry the upstream's data.
    for q in queries:
        assert q.a_addrs() == expected(q.name), (q.name, q.a_addrs())
    in_flight = [q for q in queries if q.name.startswith("m") and q.sent < ready < q.answered]
    assert in_flight, "no miss was in flight at the takeover: the test did not test the drain"

    # The new process's first second: the cached names come from the cache it was handed
    # (the old one has them all: only the new one could ask upstream for one).
    first_second = {q.name for q in queries
                    if q.name.startswith("c") and ready <= q.sent < ready + 1.0}
    asked_upstream = {e["name"] for e in fake_upstream.queries
                      if e["time"] >= started and e["name"].startswith("c")}
    warm_hits = [n for n in first_second if n.lower() not in asked_upstream]
    assert len(first_second) > 500, f"only {len(first_second)} cached names asked in that second"
    assert len(warm_hits) >= 0.95 * len(first_second), \
        f"{len(first_second) - len(warm_hits)} of {len(first_second)} cached names went upstream"

    print(f"takeover under load: {len(queries)} queries, 0 unanswered, worst latency "
          f"{max(q.latency for q in queries) * 1000:.0f} ms, {len(in_flight)} misses in flight "
          f"at ready, first second {len(warm_hits)}/{len(first_second)} cached names hit, "
          f"handover to ready {(ready - started) * 1000:.0f} ms")
    # The old one exits by itself, cleanly, through the drain.
    assert "takeover: the new instance serves; draining" in old_log
    assert "shutting down (taken over)" in old_log and "draining" in old_log
    assert "loaded " in new_log and "from the running instance" in new_log
    assert "takeover: the previous instance drains" in new_log
    # The new one serves on, the control socket included, and the paths are still there.
    assert a_addrs(udp(port, "c7.fake.test.")) == expected("c7")
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
    assert wait_for_log(d, "takeover refused: permission denied")
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_an_abandoned_takeover_leaves_the_running_instance_serving(daemon, nsd):
    d = daemon(nsd.addr)
    # A client that takes the offer and goes away without saying it serves.
    r = ask_takeover(d.control)
    assert r.returncode == 0, r.stderr
    assert "b'NSCTAKE1'" in r.stdout, r.stdout
    assert wait_for_log(d, "takeover abandoned")
    assert d.proc.poll() is None
    assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert d.stats()["queries"] >= 1


def take_offer(control):
    """As a new instance that was handed the sockets and is not ready yet: (socket, fds)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(str(control))
    s.sendall(b"takeover\n")
    msg, fds, _, _ = socket.recv_fds(s, 65536, 250)
    assert msg[:8] == b"NSCTAKE1", msg[:100]
    return s, fds


def test_an_old_instance_stopped_before_ready_leaves_the_socket_paths(daemon, nsd):
    old = daemon(nsd.addr)
    port = old.port
    nss_path = old.workdir / "nss.sock"
    # The sockets are handed over; the old one is stopped before it hears "ready".
    conn, fds = take_offer(old.control)
    try:
        old.stopped_by_test = True
        old.proc.send_signal(signal.SIGTERM)
        assert wait_exit(old, 15) == 0, old.stderr_text()
        # The paths lead to the sockets the new instance holds (the backlog waits for it).
        assert os.path.exists(old.control) and os.path.exists(nss_path)
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect(str(nss_path))
    finally:
        conn.close()
        for fd in fds:
            os.close(fd)
    # The new one never served: the files are stale, and a later start replaces them.
    later = daemon(nsd.addr, listen=(f"127.0.0.1:{port}",), extra_args=same_paths(old, port))
    later.control = old.control
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert later.stats()["queries"] >= 1
    assert os.path.exists(nss_path)


def test_a_new_instance_that_fails_to_start_leaves_the_old_one_serving(daemon, nsd):
    old = daemon(nsd.addr)
    port = old.port
    # It receives the sockets, then fails a later step (an unknown user): it exits with the
    # reason, and the old one, which never drained, serves on with its paths in place.
    new = daemon(nsd.addr, listen=(f"127.0.0.1:{port}",), expect_ready=False,
                 extra_args=same_paths(old, port) + ["--takeover", "--user", "no-such-user-nscache"])
    assert wait_exit(new, 15) == 1
    new.stopped_by_test = True
    assert "no-such-user-nscache" in new.stderr_text()
    assert wait_for_log(old, "takeover abandoned")
    assert old.proc.poll() is None
    assert os.path.exists(old.control) and os.path.exists(old.workdir / "nss.sock")
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert old.stats()["queries"] >= 1
    # Its lock is still its own.
    third = daemon(nsd.addr, expect_ready=False, extra_args=same_paths(old, port))
    assert wait_exit(third, 10) == 1
    third.stopped_by_test = True
    assert f"pid {old.pid}" in third.stderr_text()


def test_root_takes_over_an_instance_running_as_an_unprivileged_user(daemon, nsd, tmp_path):
    if os.geteuid() != 0:
        pytest.skip("needs root (the daemon switches users)")
    config = f'user = "nobody"\nstate-dir = "{tmp_path / "state"}"\n'
    old = daemon(nsd.addr, config=config)
    assert "running as user nobody" in old.stderr_text()
    port = old.port
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    new = successor(daemon, old, nsd.addr, port, "--config", str(old.workdir / "nscache.toml"))
    old.stopped_by_test = True
    assert wait_exit(old, 15) == 0, old.stderr_text()
    text = new.stderr_text()
    assert "loaded 1 entries from the running instance" in text, text
    assert "running as user nobody" in text
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert new.stats()["queries"] >= 1


def test_a_listen_address_the_old_instance_lacked_is_bound_beside_its_sockets(daemon, nsd):
    old = daemon(nsd.addr)
    port = old.port
    new = daemon(nsd.addr, listen=(f"127.0.0.1:{port}", "127.0.0.2:0"),
                 extra_args=same_paths(old, port) + ["--takeover"])
    new.control = old.control
    old.stopped_by_test = True
    assert wait_exit(old, 15) == 0, old.stderr_text()
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    added = new.listening[("udp", "127.0.0.2")]
    assert a_addrs(udp(added, f"www.{ZONE}", host="127.0.0.2")) == ["192.0.2.1"]
    # Taken over in turn, the new one hands over both (none is left unread).
    newer = successor(daemon, new, nsd.addr, port)
    new.stopped_by_test = True
    assert wait_exit(new, 15) == 0, new.stderr_text()
    assert a_addrs(udp(added, f"www.{ZONE}", host="127.0.0.2")) == ["192.0.2.1"]
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert newer.stats()["queries"] >= 2


def test_a_local_socket_at_another_path_is_not_taken(daemon, nsd):
    old = daemon(nsd.addr)
    port = old.port
    # Same control socket, another NSS socket: the new one binds its own NSS socket and leaves
    # the old one's where it is.
    new = daemon(nsd.addr, listen=(f"127.0.0.1:{port}",), extra_args=["--control", old.control, "--takeover"])
    new.control = old.control
    old.stopped_by_test = True
    assert wait_exit(old, 15) == 0, old.stderr_text()
    assert "running instance's nss socket (" in new.stderr_text()
    assert "is not configured here" in new.stderr_text()
    assert os.path.exists(new.workdir / "nss.sock")
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_the_health_and_metrics_endpoints_pass_to_the_new_instance(daemon, nsd):
    from test_health import free_tcp_port, get
    health, metrics = free_tcp_port(), free_tcp_port()
    config = f'health-listen = "127.0.0.1:{health}"\nmetrics-listen = "127.0.0.1:{metrics}"\n'
    old = daemon(nsd.addr, config=config)
    port = old.port
    # Binding either port again would fail while the old one holds it: the new one serves
    # the sockets it was handed.
    new = daemon(nsd.addr, listen=(f"127.0.0.1:{port}",), config=config,
                 extra_args=same_paths(old, port) + ["--takeover"])
    new.control = old.control
    old.stopped_by_test = True
    assert wait_exit(old, 15) == 0, old.stderr_text()
    assert get(health, "/ready")[0] == 200
    assert get(metrics, "/metrics")[0] == 200
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_during_the_old_instances_drain_probes_and_commands_reach_the_new_one(daemon, fake_upstream):
    import threading
    import dns.message
    import dns.query
    from test_health import free_tcp_port, get
    health = free_tcp_port()
    config = f'health-listen = "127.0.0.1:{health}"\n'
    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.7")
    # Within the upstream's retry timeout: the old one drains while it waits for this answer.
    fake_upstream.delays["slow.fake.test."] = 1500
    old = daemon(fake_upstream.addr, config=config)
    port = old.port
    answer = {}

    def ask():
        q = dns.message.make_query("slow.fake.test", "A")
        answer["r"] = dns.query.udp(q, "127.0.0.1", port=port, timeout=5)

    t = threading.Thread(target=ask)
    t.start()
    assert wait_until(lambda: fake_upstream.count(name="slow.fake.test.") >= 1, timeout=3)
    new = daemon(fake_upstream.addr, listen=(f"127.0.0.1:{port}",), config=config,
                 extra_args=same_paths(old, port) + ["--takeover"])
    new.control = old.control
    old.stopped_by_test = True
    assert wait_for_log(old, "shutting down (taken over)")
    statuses, flushes = [], 0
    while old.proc.poll() is None and len(statuses) < 200:
        statuses.append(get(health, "/ready")[0])
        if flushes < 10:
            r = new.cli("flush", "--control", old.control)
            assert r.returncode == 0, r.stdout + r.stderr
            flushes += 1
    assert wait_exit(old, 15) == 0, old.stderr_text()
    t.join(10)
    assert answer["r"].answer, "the in-flight query was answered during the drain"
    assert statuses and flushes, "the old instance's drain was over before any probe"
    assert set(statuses) == {200}, statuses
    # Every flush reached the new instance, none the one that drains.
    assert old.stderr_text().count("control: flushed") == 0, old.stderr_text()[-2000:]
    assert wait_for_log(new, "control: flushed")
    assert new.stderr_text().count("control: flushed") == flushes


def queued_connections(path):
    """Connections waiting in the accept queue of the unix socket at `path` (ss: Recv-Q)."""
    r = subprocess.run(["ss", "-xlH", "src", str(path)], capture_output=True, text=True, timeout=5)
    for line in r.stdout.splitlines():
        fields = line.split()
        if len(fields) > 5 and fields[4] == str(path):
            return int(fields[2])
    return 0


def test_a_new_instance_whose_old_one_dies_before_its_offer_starts_as_a_first_one(daemon, nsd):
    if shutil.which("ss") is None:
        pytest.skip("needs ss (iproute2)")
    old = daemon(nsd.addr)
    port = old.port
    old.stopped_by_test = True
    # The old one accepts nothing while stopped: the new one's request waits in its socket.
    os.kill(old.pid, signal.SIGSTOP)
    try:
        new = daemon(nsd.addr, listen=(f"127.0.0.1:{port}",), expect_ready=False,
                     extra_args=same_paths(old, port) + ["--takeover"])
        new.control = old.control
        assert wait_until(lambda: queued_connections(old.control) >= 1, timeout=10)
    finally:
        os.kill(old.pid, signal.SIGKILL)  # dies with no offer sent, its files left behind
    old.proc.wait(10)
    assert new.wait_ready(20), new.stderr_text()
    assert "went away before its offer" in new.stderr_text(), new.stderr_text()
    assert a_addrs(udp(port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert new.stats()["queries"] >= 1


def test_an_offer_from_a_control_socket_another_user_serves_is_not_asked_for(daemon, nsd):
    if os.geteuid() != 0:
        pytest.skip("needs root (setpriv)")
    # Another user's process listens where the control socket should be: whatever it would
    # hand over (sockets, a cache) is not to be trusted by a root instance.
    folder = tempfile.mkdtemp(prefix="nscache-takeover-")
    server = None
    try:
        os.chmod(folder, 0o777)
        control = os.path.join(folder, "control.sock")
        code = (
            "import socket, sys\n"
            "s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)\n"
            f"s.bind({control!r}); s.listen(4)\n"
            "print('listening', flush=True)\n"
            "s.settimeout(20)\n"
            "c, _ = s.accept(); c.recv(100); c.sendall(b'error: nope\\n'); c.recv(100)\n"
        )
        server = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                   "/usr/bin/python3", "-c", code], stdout=subprocess.PIPE, text=True)
        assert server.stdout.readline().strip() == "listening"
        new = daemon(nsd.addr, expect_ready=False, extra_args=["--control", control, "--takeover"])
        assert wait_exit(new, 15) == 1
        new.stopped_by_test = True
        assert "is served by uid 65534" in new.stderr_text(), new.stderr_text()
        assert "not trusted" in new.stderr_text()
    finally:
        if server is not None:
            server.kill()
            server.wait(5)
        shutil.rmtree(folder, ignore_errors=True)
