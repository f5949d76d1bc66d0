# SPDX-License-Identifier: BSD-3-Clause
"""The control socket and its client subcommands: stats, flush, dump, load, cache-file."""

import grp
import json
import os
import re
import resource
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time

import dns.rcode
import pytest

from harness import skip_if_sanitized

from dnshelpers import a_addrs, run, udp, wait_until

STATS_KEYS = [
    "queries", "queries_udp", "queries_tcp", "cache_hits", "cache_misses", "hit_ratio",
    "cache_entries", "cache_bytes", "cache_budget_bytes", "evictions", "expirations",
    "upstream_queries", "upstream_timeouts", "upstream_errors", "upstream_tcp_retries",
    "dropped_mismatched", "coalesced", "answers_servfail", "answers_formerr", "answers_notimp",
    "answers_refused", "answers_truncated", "upstreams",
]


def state_dir_config(path):
    return f'state-dir = "{path}"\n'


def control_request(path, line, timeout=5):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode()


def test_stats_json_has_every_key(daemon, fake_upstream):
    fake_upstream.add("k.fake.test.", "A", 300, "192.0.2.90")
    d = daemon(fake_upstream.addr, extra_args=["--cache-size", "8M"])
    udp(d.port, "k.fake.test")
    udp(d.port, "k.fake.test")
    s = d.stats()
    missing = [k for k in STATS_KEYS if k not in s]
    assert not missing, f"stats lacks {missing}"
    for k in STATS_KEYS:
        if k not in ("upstreams", "hit_ratio"):
            assert type(s[k]) is int, (k, s[k])  # a count, not a bool, float or string
    assert s["cache_budget_bytes"] == 8 * 1024 * 1024
    assert s["queries"] >= 2 and s["queries_udp"] >= 2
    assert s["cache_hits"] >= 1 and s["cache_misses"] >= 1
    assert abs(s["hit_ratio"] - s["cache_hits"] / (s["cache_hits"] + s["cache_misses"])) < 0.01
    assert s["cache_entries"] >= 1 and 0 < s["cache_bytes"] <= s["cache_budget_bytes"]
    assert s["upstream_queries"] >= 1
    assert len(s["upstreams"]) == 1
    assert str(fake_upstream.port) in str(s["upstreams"][0]["address"])
    assert s["upstreams"][0]["queries"] >= 1


def test_stats_text(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    r = d.cli("stats", "--control", d.control)
    assert r.returncode == 0, r.stderr
    names = {}
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        assert len(parts) >= 2, f"not a `name value` line: {line!r}"
        names[parts[0]] = parts[1]
    for k in ("queries", "cache_hits", "upstream_queries"):
        assert k in names, f"{k} missing from text stats:\n{r.stdout}"


def test_control_protocol_raw(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    mode = stat.S_IMODE(os.stat(d.control).st_mode)
    assert mode == 0o600, f"control socket mode {oct(mode)}"
    text = control_request(d.control, "stats")
    assert text.splitlines()[0] == "ok", text
    text = control_request(d.control, "stats json")
    first, _, rest = text.partition("\n")
    assert first == "ok"
    assert "queries" in json.loads(rest)
    text = control_request(d.control, "no-such-command")
    assert text.splitlines()[0].startswith("error:"), text
    text = control_request(d.control, "flush")
    assert text.splitlines()[0] == "ok" and re.search(r"flushed \d+ entries", text), text
    # still alive and serving control after the bad request (control requests are no queries)
    assert d.stats()["queries"] == 0


@pytest.mark.threaded
def test_flush_all(daemon, fake_upstream):
    for n in ("a", "b"):
        fake_upstream.add(f"{n}.fake.test.", "A", 300, "192.0.2.91")
    d = daemon(fake_upstream.addr)
    for _ in range(2):
        udp(d.port, "a.fake.test")
        udp(d.port, "b.fake.test")
    assert fake_upstream.count(name="a.fake.test") == 1 and fake_upstream.count(name="b.fake.test") == 1
    r = d.flush()
    assert re.search(r"flushed [1-9]\d* entries", r.stdout + r.stderr), r.stdout
    assert a_addrs(udp(d.port, "a.fake.test")) == ["192.0.2.91"]
    assert a_addrs(udp(d.port, "b.fake.test")) == ["192.0.2.91"]
    assert fake_upstream.count(name="a.fake.test") == 2
    assert fake_upstream.count(name="b.fake.test") == 2


def test_flush_name(daemon, fake_upstream):
    for n in ("keep", "drop"):
        fake_upstream.add(f"{n}.fake.test.", "A", 300, "192.0.2.92")
    d = daemon(fake_upstream.addr)
    udp(d.port, "keep.fake.test")
    udp(d.port, "drop.fake.test")
    udp(d.port, "drop.fake.test", "AAAA")
    r = d.flush("drop.fake.test")
    assert re.search(r"flushed [1-9]\d* entries", r.stdout + r.stderr), r.stdout
    udp(d.port, "keep.fake.test")
    udp(d.port, "DROP.fake.test")
    assert fake_upstream.count(name="keep.fake.test") == 1, "flush NAME removed another name"
    assert fake_upstream.count("udp", name="drop.fake.test") == 3
    # the nonexistent name flushes nothing but succeeds
    r = d.flush("never-seen.fake.test")
    assert re.search(r"flushed 0 entries", r.stdout + r.stderr), r.stdout


@pytest.mark.threaded
def test_dump_and_load(daemon, fake_upstream, tmp_path):
    for i in range(3):
        fake_upstream.add(f"d{i}.fake.test.", "A", 300, f"192.0.2.{93 + i}")
    d1 = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    for i in range(3):
        udp(d1.port, f"d{i}.fake.test")
    dumpfile = tmp_path / "cache.dump"
    r = d1.cli("dump", "--control", d1.control, str(dumpfile))
    assert r.returncode == 0, r.stderr
    m = re.search(r"dumped (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) >= 3, r.stdout + r.stderr
    assert dumpfile.exists() and dumpfile.stat().st_size > 0
    d2 = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    # A relative name is taken inside state-dir.
    r = d2.cli("load", "--control", d2.control, "cache.dump")
    assert r.returncode == 0, r.stderr
    m = re.search(r"loaded (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) >= 3, r.stdout + r.stderr
    before = sum(fake_upstream.count(name=f"d{i}.fake.test") for i in range(3))
    for i in range(3):
        r = udp(d2.port, f"d{i}.fake.test")
        assert a_addrs(r) == [f"192.0.2.{93 + i}"]
        assert r.answer[0].ttl <= 300
    assert sum(fake_upstream.count(name=f"d{i}.fake.test") for i in range(3)) == before, \
        "loaded entries were not used"


def test_cache_file_survives_restart(daemon, fake_upstream, tmp_path):
    fake_upstream.add("persist.fake.test.", "A", 300, "192.0.2.97")
    cache_file = tmp_path / "nscache.cache"
    cfg = f'cache-file = "{cache_file}"\n'
    d1 = daemon(fake_upstream.addr, config=cfg)
    udp(d1.port, "persist.fake.test")
    assert d1.stop() == 0, d1.stderr_text()
    assert cache_file.exists(), "cache-file was not written on shutdown"
    d2 = daemon(fake_upstream.addr, config=cfg)
    r = udp(d2.port, "persist.fake.test")
    assert a_addrs(r) == ["192.0.2.97"]
    assert fake_upstream.count(name="persist.fake.test") == 1


def test_load_missing_file_fails(daemon, fake_upstream, tmp_path):
    d = daemon(fake_upstream.addr, config=state_dir_config(tmp_path))
    r = d.cli("load", "--control", d.control, str(tmp_path / "absent.dump"))
    assert r.returncode != 0
    assert d.proc.poll() is None
    assert udp(d.port, "whatever.fake.test").rcode() == dns.rcode.NXDOMAIN


def _free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_get(port, path, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body.decode("utf-8", "replace")


def test_metrics_endpoint(daemon, fake_upstream):
    fake_upstream.add("m.fake.test.", "A", 300, "192.0.2.98")
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    udp(d.port, "m.fake.test")
    udp(d.port, "m.fake.test")
    head, body = _http_get(port, "/metrics")
    assert head.split("\r\n")[0].split()[1] == "200", head
    samples = [l for l in body.splitlines() if l and not l.startswith("#")]
    assert samples, body
    for l in samples:
        assert re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$", l), f"not a Prometheus sample: {l!r}"
    assert any(l.startswith("nscache_") for l in samples), body[:500]


# --------------------------------------------------------------------------------------
# Slow and unwelcome clients
# --------------------------------------------------------------------------------------

class Trickler:
    """A client that sends one byte a second and never ends its request."""

    def __init__(self, connect):
        self.sock = connect()
        self.sent = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            while not self.stopping.is_set():
                self.sock.send(b"s")
                self.sent += 1
                self.stopping.wait(1)
        except OSError:
            pass  # the daemon closed it

    def close(self):
        self.stopping.set()
        self.thread.join(5)
        self.sock.close()


def _unix_connect(path):
    def connect():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(path)
        return s
    return connect


def _tcp_connect(port):
    return lambda: socket.create_connection(("127.0.0.1", port), timeout=5)


def _trickle(d, port):
    slow = [Trickler(_unix_connect(d.control)), Trickler(_tcp_connect(port))]
    assert wait_until(lambda: all(t.sent >= 2 for t in slow), timeout=10)
    return slow


def test_slow_clients_do_not_hold_up_stats(daemon, fake_upstream):
    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.99")
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    udp(d.port, "slow.fake.test")
    slow = _trickle(d, port)
    try:
        try:
            r = d.cli("stats", "--control", d.control, "--json", timeout=10)
        except subprocess.TimeoutExpired:
            pytest.fail("`nscache stats` waited behind a client that sends one byte a second")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["cache_entries"] >= 1
        head, body = _http_get(port, "/metrics")
        assert head.split("\r\n")[0].split()[1] == "200", head
    finally:
        for t in slow:
            t.close()


def test_sigterm_with_slow_clients_exits_and_saves_the_cache(daemon, fake_upstream, tmp_path):
    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.99")
    cache_file = tmp_path / "slow.cache"
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'cache-file = "{cache_file}"\nmetrics-listen = "127.0.0.1:{port}"\n')
    udp(d.port, "slow.fake.test")
    slow = _trickle(d, port)
    try:
        code = d.stop(timeout=5)
    finally:
        for t in slow:
            t.close()
    assert code == 0, f"exit code {code} (None: needed SIGKILL)\n{d.stderr_text()}"
    assert cache_file.exists() and re.search(r"saved [1-9]\d* entries", d.stderr_text()), d.stderr_text()


def test_metrics_refuses_clients_outside_metrics_allow(daemon, fake_upstream):
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr,
               config=f'metrics-listen = "127.0.0.1:{port}"\nmetrics-allow = ["192.0.2.0/24"]\n')
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        try:
            s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
            while chunk := s.recv(65536):
                data += chunk
        except ConnectionResetError:
            pass
    assert data == b"", f"127.0.0.1 is outside metrics-allow but got: {data[:200]!r}"
    # The refused client cost the daemon nothing: it serves DNS and control as before.
    fake_upstream.add("after.fake.test.", "A", 300, "192.0.2.91")
    assert a_addrs(udp(d.port, "after.fake.test")) == ["192.0.2.91"]
    assert d.stats()["queries"] == 1


# --------------------------------------------------------------------------------------
# dump and load: inside state-dir, never through a link
# --------------------------------------------------------------------------------------

def test_dump_and_load_stay_inside_state_dir(daemon, fake_upstream, tmp_path):
    fake_upstream.add("in.fake.test.", "A", 300, "192.0.2.81")
    state = tmp_path / "state"
    state.mkdir()
    d = daemon(fake_upstream.addr, config=state_dir_config(state))
    udp(d.port, "in.fake.test")
    outside = tmp_path / "outside.dump"
    for command, name in (("dump", str(outside)), ("dump", "../outside.dump"), ("load", "/etc/passwd"),
                          ("load", "../state/../outside.dump")):
        r = d.cli(command, "--control", d.control, name)
        assert r.returncode == 1, f"{command} {name}: {r.stdout}{r.stderr}"
        assert "outside the state folder" in r.stderr and str(state) in r.stderr, r.stderr
    assert not outside.exists()
    assert d.stats()["cache_entries"] == 1
    for name in ("inside.dump", str(state / "inside2.dump")):
        r = d.cli("dump", "--control", d.control, name)
        assert r.returncode == 0, r.stderr
    assert (state / "inside.dump").exists() and (state / "inside2.dump").exists()


def test_dump_and_load_never_follow_links(daemon, fake_upstream, tmp_path):
    fake_upstream.add("link.fake.test.", "A", 300, "192.0.2.82")
    state = tmp_path / "state"
    state.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    d = daemon(fake_upstream.addr, config=state_dir_config(state))
    udp(d.port, "link.fake.test")
    # A link where the temporary file goes, and one at the target itself.
    (state / "a.dump.tmp").symlink_to(victim)
    (state / "b.dump").symlink_to(victim)
    for name in ("a.dump", "b.dump"):
        r = d.cli("dump", "--control", d.control, name)
        assert r.returncode == 0, f"{name}: {r.stderr}"
        assert victim.read_text() == "precious\n", f"dump {name} wrote through a link"
        assert (state / name).is_file() and not (state / name).is_symlink()
    assert not (state / "a.dump.tmp").exists() and not (state / "a.dump.tmp").is_symlink()
    # load refuses a link, even to a good file inside the folder.
    (state / "c.dump").symlink_to(state / "a.dump")
    r = d.cli("load", "--control", d.control, "c.dump")
    assert r.returncode == 1 and "symbolic link" in r.stderr, r.stdout + r.stderr
    r = d.cli("load", "--control", d.control, "a.dump")
    assert r.returncode == 0 and "loaded 1 entries" in r.stdout, r.stdout + r.stderr


# --------------------------------------------------------------------------------------
# Who may use the control socket
# --------------------------------------------------------------------------------------

@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv"), reason="needs root and setpriv")
def test_control_group_through_a_supplementary_group(daemon, fake_upstream, nscache):
    try:
        gid = grp.getgrnam("users").gr_gid
    except KeyError:
        pytest.skip("no 'users' group")
    folder = tempfile.mkdtemp(prefix="nscache-group-", dir="/tmp")
    try:
        os.chmod(folder, 0o755)  # nobody must reach the socket to be judged by the daemon
        sock = os.path.join(folder, "control.sock")
        d = daemon(fake_upstream.addr, config='control-group = "users"\n', extra_args=["--control", sock])
        st = os.stat(sock)
        assert stat.S_IMODE(st.st_mode) == 0o660 and st.st_gid == gid, (oct(st.st_mode), st.st_gid)
        nobody = ["setpriv", "--reuid=65534", "--regid=65534"]
        r = run(nobody + [f"--groups={gid}", "--", nscache, "stats", "--control", sock])
        assert r.returncode == 0, f"a member of 'users' through a supplementary group was refused: {r.stderr}"
        assert "queries" in r.stdout
        r = run(nobody + ["--clear-groups", "--", nscache, "stats", "--control", sock])
        assert r.returncode == 1, r.stdout + r.stderr
        assert d.stop() == 0
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# --------------------------------------------------------------------------------------
# Out of descriptors
# --------------------------------------------------------------------------------------

def _cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_out_of_descriptors_neither_spins_nor_floods_the_log(daemon, fake_upstream):
    skip_if_sanitized()
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    limits = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
    # Not one descriptor more than the daemon holds now: every accept fails with EMFILE.
    resource.prlimit(d.pid, resource.RLIMIT_NOFILE, (len(os.listdir(f"/proc/{d.pid}/fd")), limits[1]))
    waiting = []
    try:
        for _ in range(3):
            waiting.append(_unix_connect(d.control)())
            waiting.append(_tcp_connect(port)())
        for s in waiting:
            try:
                s.sendall(b"stats\n" if s.family == socket.AF_UNIX else b"GET /metrics HTTP/1.0\r\n\r\n")
            except OSError:
                pass  # already accepted and closed by the daemon, to shed it
        started = time.monotonic()
        cpu_before = _cpu_seconds(d.pid)
        time.sleep(3)
        cpu = _cpu_seconds(d.pid) - cpu_before
        elapsed = time.monotonic() - started
        assert cpu < 0.5, f"the daemon used {cpu:.2f} s of CPU in {elapsed:.1f} s while out of descriptors"
        lines = [l for l in d.stderr_text().splitlines() if "out of file descriptors" in l]
        assert lines, d.stderr_text()
        assert len(lines) <= elapsed + 2, f"{len(lines)} log lines in {elapsed:.1f} s"
    finally:
        resource.prlimit(d.pid, resource.RLIMIT_NOFILE, limits)
        for s in waiting:
            s.close()
    # Descriptors again: DNS, control and metrics answer.
    fake_upstream.add("back.fake.test.", "A", 300, "192.0.2.92")
    assert a_addrs(udp(d.port, "back.fake.test")) == ["192.0.2.92"]
    assert d.stats()["queries"] == 1
    head, _ = _http_get(port, "/metrics")
    assert head.split("\r\n")[0].split()[1] == "200", head
