# SPDX-License-Identifier: BSD-3-Clause
"""Real redis-server processes for the shared-cache tests, and a minimal RESP client to look at
and tamper with what they hold. Servers listen on free loopback ports (or a unix socket in the
test's folder), keep nothing on disk, and are stopped by PID."""

import os
import shutil
import signal
import socket
import subprocess
import time

from harness import stop_process

REDIS_SERVER = shutil.which("redis-server") or "/usr/bin/redis-server"
REDIS_CLI = shutil.which("redis-cli") or "/usr/bin/redis-cli"


def free_tcp_port():
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class RespClient:
    """Just enough of RESP2 to GET, SET, PTTL, KEYS and run CLUSTER commands."""

    def __init__(self, port=None, unix=None, timeout=3.0):
        if unix:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(timeout)
            self.sock.connect(unix)
        else:
            self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.buf = b""

    def close(self):
        self.sock.close()

    def command(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            if isinstance(a, str):
                a = a.encode()
            elif isinstance(a, int):
                a = str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.sock.sendall(out)
        return self._reply()

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def _reply(self):
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            raise RuntimeError(rest.decode())
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise RuntimeError(f"bad RESP line {line!r}")


class RedisServer:
    def __init__(self, workdir, port=None, unix=False, cluster=False, extra=()):
        self.workdir = workdir
        os.makedirs(workdir, exist_ok=True)
        self.port = port if port is not None else (0 if unix else free_tcp_port())
        self.unix = os.path.join(workdir, "redis.sock") if unix else None
        args = [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1",
                "--save", "", "--appendonly", "no", "--dir", workdir,
                "--daemonize", "no", "--protected-mode", "no", "--loglevel", "warning",
                "--logfile", os.path.join(workdir, "redis.log")]
        if self.unix:
            args += ["--unixsocket", self.unix, "--unixsocketperm", "700"]
        if cluster:
            # The bus port is named: the default (port + 10000) does not exist above 55535.
            args += ["--cluster-enabled", "yes", "--cluster-port", str(free_tcp_port()),
                     "--cluster-config-file",
                     os.path.join(workdir, "nodes.conf"), "--cluster-node-timeout", "1000",
                     "--cluster-require-full-coverage", "no"]
        args += list(extra)
        self.args = args
        self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL)
        self.pid = self.proc.pid
        self.stopped = False
        deadline = time.monotonic() + 10
        while True:
            try:
                c = self.client(timeout=0.5)
                try:
                    if c.command("PING") == "PONG":
                        break
                except RuntimeError as e:  # up, and asking for a password (requirepass)
                    if "NOAUTH" in str(e):
                        break
                finally:
                    c.close()
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                log = os.path.join(workdir, "redis.log")
                text = open(log).read() if os.path.exists(log) else ""
                self.kill()
                raise RuntimeError(f"redis-server did not start: {text}")
            time.sleep(0.05)

    @property
    def address(self):
        return self.unix if self.unix else f"127.0.0.1:{self.port}"

    def client(self, timeout=3.0):
        return RespClient(port=self.port, unix=self.unix, timeout=timeout)

    def command(self, *args):
        c = self.client()
        try:
            return c.command(*args)
        finally:
            c.close()

    def pause(self):
        os.kill(self.pid, signal.SIGSTOP)

    def resume(self):
        os.kill(self.pid, signal.SIGCONT)

    def kill(self):
        """SIGKILL (and SIGCONT, in case it was stopped); waits for it."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=5)
        self.stopped = True

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            stop_process(self.proc)
        self.stopped = True


def create_cluster(servers):
    """`redis-cli --cluster create` over the given cluster-enabled servers (masters only);
    waits until every node reports cluster_state:ok and knows every other node."""
    nodes = [f"127.0.0.1:{s.port}" for s in servers]
    r = subprocess.run([REDIS_CLI, "--cluster", "create", *nodes, "--cluster-replicas", "0",
                        "--cluster-yes"], capture_output=True, text=True, timeout=60)
    if r.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster create failed: {r.stdout}{r.stderr}")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        ok = True
        for s in servers:
            info = s.command("CLUSTER", "INFO").decode()
            if "cluster_state:ok" not in info or f"cluster_known_nodes:{len(servers)}" not in info:
                ok = False
        if ok:
            return
        time.sleep(0.1)
    raise RuntimeError("the cluster did not reach cluster_state:ok")


def node_id(server):
    return server.command("CLUSTER", "MYID").decode()


def reshard(source, target, slots, via):
    """Moves `slots` hash slots from `source` to `target` with redis-cli (MIGRATE key by key:
    clients meet ASK during the move and MOVED after it)."""
    r = subprocess.run([REDIS_CLI, "--cluster", "reshard", f"127.0.0.1:{via.port}",
                        "--cluster-from", node_id(source), "--cluster-to", node_id(target),
                        "--cluster-slots", str(slots), "--cluster-yes", "--cluster-pipeline", "10"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"redis-cli --cluster reshard failed: {r.stdout}{r.stderr}")
