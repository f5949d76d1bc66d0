# SPDX-License-Identifier: BSD-3-Clause
"""The daemon's NSS socket under conditions the shared `daemon` fixture cannot set up: the
daemon started under strace (how it sets the socket's mode) and with few file descriptors
(what it does when accept fails). Each test starts `nscache serve` itself (ServeProcess) and
stops it by PID."""

import os
import re
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import clean_env, stop_process, skip_if_sanitized
from nssclient import NSS_SUCCESS, direct


class ServeProcess:
    """`nscache serve` on a private control and NSS socket, behind `prefix` (a command that
    execs it, or strace, which runs it as a child)."""

    def __init__(self, nscache, workdir, upstream, prefix=(), preexec_fn=None):
        self.workdir = Path(workdir)
        self.socket_path = self.workdir / "nss.sock"
        config = self.workdir / "empty.toml"
        config.write_text("# empty: all defaults\n")
        args = [*prefix, nscache, "serve", "--listen", "127.0.0.1:0", "--upstream", upstream.addr,
                "--control", str(self.workdir / "control.sock"), "--nss-socket", str(self.socket_path),
                "--threads", "1", "--config", str(config)]
        self.lines = []
        self.ready = threading.Event()
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.PIPE, env=clean_env(), preexec_fn=preexec_fn)
        self.reader = threading.Thread(target=self._drain, daemon=True)
        self.reader.start()
        if not self.ready.wait(15):
            self.stop()
            pytest.fail("nscache serve did not start:\n" + "\n".join(self.lines))

    def _drain(self):
        for raw in self.proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip("\n")
            self.lines.append(line)
            if re.match(r"^(?:<\d>)?info: ready$", line):
                self.ready.set()

    def daemon_pid(self):
        """The daemon itself: this process, or its one child under strace."""
        children = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()
        return int(children[0]) if children else self.proc.pid

    def stop(self):
        pid = self.daemon_pid() if self.proc.poll() is None else None
        if pid is not None and pid != self.proc.pid:
            os.kill(pid, 15)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        stop_process(self.proc)
        self.reader.join(timeout=5)


@pytest.fixture
def serve(nscache, fake_upstream, tmp_path):
    started = []

    def start(prefix=(), preexec_fn=None):
        fake_upstream.add("www.example.test.", "A", 300, "192.0.2.1")
        workdir = tmp_path / f"serve{len(started)}"
        workdir.mkdir()
        s = ServeProcess(nscache, workdir, fake_upstream, prefix, preexec_fn)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


def test_socket_mode_comes_from_the_umask_not_chmod(serve, tmp_path):
    """The socket is born 0666 whatever the daemon's umask, and the daemon never changes a
    mode or owner by the socket's path: root would follow a symlink another user put there."""
    log = tmp_path / "strace.log"
    s = serve(prefix=["strace", "-f", "-qq", "-o", str(log), "-e", "trace=/^(f|l)?ch(mod|own)", "--"],
              preexec_fn=lambda: os.umask(0o077))
    assert os.stat(s.socket_path).st_mode & 0o777 == 0o666
    s.stop()
    calls = [l for l in log.read_text().splitlines() if str(s.socket_path) in l]
    assert calls == [], calls


def _cpu_seconds(pid):
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_out_of_descriptors_does_not_spin(serve, netns, nss_build, nscache):
    """With its descriptors used up by idle clients, the daemon can accept nothing: it must
    neither spin on the still-readable listening socket nor log a line per attempt, and it
    answers again once the clients go."""
    skip_if_sanitized()
    s = serve(prefix=["prlimit", "--nofile=32:32", "--"])
    pid = s.daemon_pid()
    clients = []
    try:
        for _ in range(80):  # more than the daemon's 32 descriptors; the rest wait in the backlog
            c = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            c.connect(str(s.socket_path))
            clients.append(c)
        deadline = time.monotonic() + 10
        while len(os.listdir(f"/proc/{pid}/fd")) < 30 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(os.listdir(f"/proc/{pid}/fd")) >= 30, "the daemon never ran out of descriptors"

        cpu0, wall0 = _cpu_seconds(pid), time.monotonic()
        time.sleep(2)
        cpu, wall = _cpu_seconds(pid) - cpu0, time.monotonic() - wall0
        assert cpu < 0.5 * wall, f"the daemon used {cpu:.2f} s of CPU in {wall:.2f} s while out of descriptors"
        warnings = [l for l in s.lines if "cannot accept" in l]
        assert len(warnings) <= wall + 12, warnings  # one a second at most (10 s of waiting above)
        assert warnings, "running out of descriptors is not logged"
    finally:
        for c in clients:
            c.close()
    env = {"NSCACHE_NSS_SOCKET": str(s.socket_path)}
    deadline = time.monotonic() + 10
    while True:
        r = direct(netns, nss_build, "gethostbyname4_r", "www.example.test", env=env)
        if r.status == NSS_SUCCESS or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert r.status == NSS_SUCCESS and r.values("addr") == ["192.0.2.1"], r
