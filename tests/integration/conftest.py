# SPDX-License-Identifier: BSD-3-Clause
"""Fixtures for nscache's integration tests.

- `nsd`: a real authoritative upstream (NSD) on a free loopback port, serving zones generated
  here (session scope).
- `fake_upstream`: a scriptable fake DNS server (see fakeupstream.py), one per test.
- `dead_upstream`: a bound UDP socket on loopback that never answers.
- `daemon`: a factory that starts `nscache serve` on a free port and stops it afterwards,
  asserting a clean exit.

All traffic stays on 127.0.0.0/8 and ::1; the daemon is always given explicit upstreams.
Run with: NSCACHE_BIN=build/nscache /usr/bin/python3 -m pytest -v tests/integration
"""

import json
import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import pytest

from fakeupstream import FakeUpstream, free_port_pair
from harness import (LOWTTL_ZONE, NSD_BIN, REPO, ZONE, clean_env, example_zone_text, lowttl_zone_text,
                     stop_process)

class Nsd:
    def __init__(self, proc, port, workdir):
        self.proc = proc
        self.port = port
        self.host = "127.0.0.1"
        self.addr = f"127.0.0.1:{port}"
        self.workdir = workdir
        self.pid = proc.pid


def _nsd_answers(port, timeout):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            q = dns.message.make_query(f"{ZONE}.", "SOA")
            r = dns.query.udp(q, "127.0.0.1", port=port, timeout=0.3)
            if r.rcode() == dns.rcode.NOERROR and r.answer:
                return True
        except Exception:
            pass
        time.sleep(0.1)
    return False


@pytest.fixture(scope="session")
def nsd(tmp_path_factory):
    if not os.path.exists(NSD_BIN):
        pytest.skip("nsd is not installed")
    work = tmp_path_factory.mktemp("nsd")
    (work / f"{ZONE}.zone").write_text(example_zone_text())
    (work / f"{LOWTTL_ZONE}.zone").write_text(lowttl_zone_text())
    proc = None
    last_err = ""
    for attempt in range(5):
        udp, tcp, port = free_port_pair()
        udp.close()
        tcp.close()
        conf = work / "nsd.conf"
        conf.write_text(f"""server:
    ip-address: 127.0.0.1@{port}
    port: {port}
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{work}"
    pidfile: "{work}/nsd.pid"
    zonelistfile: "{work}/zone.list"
    xfrdfile: "{work}/xfrd.state"
    xfrdir: "{work}"
    database: ""
    logfile: "{work}/nsd.log"
    server-count: 1
    verbosity: 1
    # Response rate limiting would drop or truncate the tests' bursts (a daemon sees
    # timeouts that are not its fault).
    rrl-ratelimit: 0
    rrl-whitelist-ratelimit: 0
    hide-version: yes
    reuseport: no
    tcp-count: 128
    minimal-responses: yes
remote-control:
    control-enable: no
zone:
    name: "{ZONE}"
    zonefile: "{work}/{ZONE}.zone"
zone:
    name: "{LOWTTL_ZONE}"
    zonefile: "{work}/{LOWTTL_ZONE}.zone"
""")
        check = subprocess.run(["/usr/sbin/nsd-checkconf", str(conf)], capture_output=True, text=True, timeout=10) \
            if os.path.exists("/usr/sbin/nsd-checkconf") else None
        if check is not None and check.returncode != 0:
            pytest.fail(f"nsd-checkconf rejected the generated config: {check.stdout}{check.stderr}")
        errlog = open(work / f"nsd-stderr-{attempt}.log", "w")
        proc = subprocess.Popen([NSD_BIN, "-d", "-c", str(conf)], stdout=errlog, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL)
        errlog.close()
        if _nsd_answers(port, 10):
            break
        stop_process(proc)
        last_err = (work / f"nsd-stderr-{attempt}.log").read_text()
        if (work / "nsd.log").exists():
            last_err += (work / "nsd.log").read_text()
        proc = None
    if proc is None:
        pytest.fail(f"nsd did not start: {last_err}")
    server = Nsd(proc, port, work)
    try:
        yield server
    finally:
        stop_process(proc)


# --------------------------------------------------------------------------------------
# Fake upstream and dead upstream
# --------------------------------------------------------------------------------------

@pytest.fixture
def make_fake():
    """Factory of extra fake upstreams (all stopped at teardown)."""
    made = []

    def make(host="127.0.0.1"):
        f = FakeUpstream(host).start()
        made.append(f)
        return f

    try:
        yield make
    finally:
        for f in made:
            f.stop()


@pytest.fixture
def fake_upstream(make_fake):
    return make_fake()


class _Dead:
    def __init__(self):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.addr = f"127.0.0.1:{self.port}"


@pytest.fixture
def dead_upstream():
    """A factory of bound UDP sockets that never answer (nothing reads them)."""
    made = []

    def make():
        d = _Dead()
        made.append(d)
        return d

    try:
        yield make
    finally:
        for d in made:
            d.sock.close()


# --------------------------------------------------------------------------------------
# The daemon
# --------------------------------------------------------------------------------------

def nscache_bin():
    env = os.environ.get("NSCACHE_BIN")
    if env:
        return Path(env).resolve(), True
    return REPO / "build" / "nscache", False


@pytest.fixture(scope="session")
def nscache():
    """Path of the nscache binary (skip if it was not built and NSCACHE_BIN was not set)."""
    path, explicit = nscache_bin()
    if not path.exists() or not os.access(path, os.X_OK):
        if explicit:
            pytest.fail(f"NSCACHE_BIN={path} does not exist or is not executable")
        pytest.skip(f"{path} not built (set NSCACHE_BIN)")
    return str(path)


LISTEN_RE = re.compile(r"^(?:<\d>)?info: listening on (udp|tcp) (\S+)$")


def split_addr(s):
    host, _, port = s.rpartition(":")
    return host.strip("[]"), int(port)


class Daemon:
    def __init__(self, binary, args, workdir, control, wrapper=(), extra_env=None, pass_fds=()):
        self.binary = binary
        self.args = args
        self.workdir = workdir
        self.control = str(control)
        self.lines = []
        self.lock = threading.Lock()
        self.ready = threading.Event()
        self.eof = threading.Event()
        self.listening = {}  # ("udp"|"tcp", host) -> port
        self.stdout_file = open(workdir / "stdout.log", "w")
        env = clean_env()
        env.update(extra_env or {})
        # `wrapper` (prlimit, setpriv...) must exec the daemon, so the PID stays the daemon's.
        self.proc = subprocess.Popen(list(wrapper) + [binary] + args, stdin=subprocess.DEVNULL,
                                     stdout=self.stdout_file, stderr=subprocess.PIPE, env=env,
                                     cwd=str(workdir), pass_fds=tuple(pass_fds))
        self.pid = self.proc.pid
        self.stopped_by_test = False
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()

    def _drain(self):
        try:
            for raw in self.proc.stderr:
                line = raw.decode("utf-8", "replace").rstrip("\n")
                with self.lock:
                    self.lines.append(line)
                m = LISTEN_RE.match(line)
                if m and not self.ready.is_set():
                    host, port = split_addr(m.group(2))
                    self.listening[(m.group(1), host)] = port
                if re.match(r"^(?:<\d>)?info: ready$", line):
                    self.ready.set()
        finally:
            self.eof.set()

    def stderr_text(self):
        # A daemon that has exited may still have lines in the pipe: read them all first.
        if self.proc.poll() is not None:
            self.eof.wait(5)
        with self.lock:
            return "\n".join(self.lines)

    def wait_ready(self, timeout=10.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.ready.wait(0.05):
                return True
            if self.proc.poll() is not None:
                self.eof.wait(2)
                return False
        return False

    @property
    def port(self):
        return self.listening[("udp", "127.0.0.1")]

    @property
    def tcp_port(self):
        return self.listening[("tcp", "127.0.0.1")]

    # ---- control helpers -------------------------------------------------------------
    def cli(self, *args, timeout=15):
        return subprocess.run([self.binary] + list(args), capture_output=True, text=True, timeout=timeout,
                              env=clean_env())

    def stats(self):
        r = self.cli("stats", "--control", self.control, "--json")
        assert r.returncode == 0, f"nscache stats failed ({r.returncode}): {r.stdout}{r.stderr}"
        try:
            return json.loads(r.stdout)
        except json.JSONDecodeError as e:
            raise AssertionError(f"nscache stats --json printed no JSON object ({e}): {r.stdout!r}")

    def flush(self, name=None):
        args = ["flush", "--control", self.control]
        if name is not None:
            args.append(name)
        r = self.cli(*args)
        assert r.returncode == 0, f"nscache flush failed ({r.returncode}): {r.stdout}{r.stderr}"
        return r

    def stop(self, timeout=5):
        """SIGTERM by PID; SIGKILL after `timeout`. Returns the exit code (None if killed)."""
        self.stopped_by_test = True
        code = stop_process(self.proc, timeout)
        self.eof.wait(2)
        self.stdout_file.close()
        return code


@pytest.fixture
def daemon(nscache, tmp_path):
    """Factory: daemon(upstreams=[...], config=None (TOML text, or a Path), extra_args=[], threads=2).

    Returns a started, ready Daemon. Each daemon gets its own control socket in tmp_path.
    At teardown every daemon gets SIGTERM and must exit 0 within 5 s."""
    started = []

    def start(upstreams, config=None, extra_args=(), threads=2, listen=("127.0.0.1:0",), expect_ready=True,
              wrapper=(), extra_env=None, pass_fds=()):
        if isinstance(upstreams, str):
            upstreams = [upstreams]
        cfg_text = config.read_text() if isinstance(config, Path) else (config or "")
        # Explicit upstreams, or a resolv-file the test wrote itself (never the host's).
        assert upstreams or re.search(r"(?m)^(upstream\s*=\s*\[\s*\S|resolv-file\s*=)", cfg_text), \
            "tests must always give the daemon explicit upstreams (flags or config)"
        if not listen:
            assert re.search(r"(?m)^listen\s*=", cfg_text), "no --listen and no listen in the config"
        n = len(started)
        workdir = tmp_path / f"daemon{n}"
        workdir.mkdir()
        control = workdir / "control.sock"
        args = ["serve"]
        for l in listen:
            args += ["--listen", l]
        for u in upstreams:
            args += ["--upstream", u]
        args += ["--control", str(control)]
        # Each daemon gets its own NSS socket too (the default lives in /run/nscache, which
        # concurrent test daemons would take from each other).
        if not any(a.startswith("--nss-") for a in extra_args):
            args += ["--nss-socket", str(workdir / "nss.sock")]
        if threads is not None:
            args += ["--threads", str(threads)]
        if config is not None:
            if not isinstance(config, Path):  # TOML text
                path = workdir / "nscache.toml"
                path.write_text(config)
                config = path
            args += ["--config", str(config)]
        elif os.path.exists("/etc/nscache/nscache.toml"):
            # Keep the host's config out of the tests.
            path = workdir / "empty.toml"
            path.write_text("# empty: all defaults\n")
            args += ["--config", str(path)]
        args += list(extra_args)
        d = Daemon(nscache, args, workdir, control, wrapper, extra_env, pass_fds)
        started.append(d)
        if expect_ready:
            if not d.wait_ready(10):
                code = d.proc.poll()
                if code is None:
                    d.stop()
                    why = "did not print 'info: ready' within 10 s"
                else:
                    why = f"exited with code {code} before 'info: ready'"
                pytest.fail(f"nscache serve {why}.\nargs: {args}\nstderr:\n{d.stderr_text()}")
            if ("udp", "127.0.0.1") not in d.listening and any(l.startswith("127.0.0.1:") for l in listen):
                pytest.fail(f"no 'info: listening on udp 127.0.0.1:PORT' line.\nstderr:\n{d.stderr_text()}")
        return d

    yield start

    problems = []
    for d in started:
        alive = d.proc.poll() is None
        if not alive and not d.stopped_by_test and d.ready.is_set():
            problems.append(f"pid {d.pid}: exited by itself during the test with code {d.proc.returncode}\n"
                            f"stderr:\n{d.stderr_text()[-4000:]}")
        code = d.stop()
        if alive and code != 0:
            problems.append(f"pid {d.pid}: exit code {code} after SIGTERM (None = needed SIGKILL)\n"
                            f"stderr:\n{d.stderr_text()[-4000:]}")
    if problems:
        pytest.fail("daemon did not shut down cleanly:\n" + "\n".join(problems))
