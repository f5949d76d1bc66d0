# SPDX-License-Identifier: BSD-3-Clause
"""Plays systemd's part in socket activation (sd_listen_fds(3)) for the integration tests.

A SocketLauncher binds the sockets once, in the test process: UDP and TCP on one 127.0.0.1 port
(a large receive buffer, SO_RCVBUFFORCE as root, as the socket unit's ReceiveBuffer=), and
optionally the control, NSS and nscd unix sockets (listening, as systemd's are). start()
runs `nscache serve` with them through the `daemon` fixture: the daemon's process is this
file run as a wrapper (`python3 socket_launcher.py NAMES -- nscache serve ...`), which moves
the inherited descriptors to 3, 4, ..., sets LISTEN_FDS, LISTEN_FDNAMES and LISTEN_PID (its
own pid, which exec keeps) and execs the daemon. restart() stops the running daemon (SIGTERM,
waits for its exit) and starts the next one on the same sockets: what arrives in between
waits in the kernel's queues, as under `systemctl restart` with nscache.socket.

Reusable by other tests: `SocketLauncher(tmp_path, unix=("control", "nscd"))`, then
`launcher.start(daemon, upstreams=[...])`.
"""

import os
import socket
import stat
import sys

RECEIVE_BUFFER = 4 << 20
SO_RCVBUFFORCE = getattr(socket, "SO_RCVBUFFORCE", 33)


class SocketLauncher:
    def __init__(self, workdir, host="127.0.0.1", udp=1, tcp=1, unix=(), paths=None, port=None):
        """`unix`: names among "control", "nss", "nscd" (paths in `workdir` unless `paths`
        gives them). `port` (one UDP and one TCP socket only): that port instead of a free one
        (bench/restart/run, which runs without the tests' dnspython)."""
        self.sockets = []  # (name, socket object)
        self.host = host
        if port is not None:
            if (udp, tcp) != (1, 1):
                raise ValueError("a given port takes one UDP and one TCP socket")
            udps, tcps = [_bound(host, socket.SOCK_DGRAM, port)], [_bound(host, socket.SOCK_STREAM, port)]
            self.port = port
        elif udp == 1 and tcp == 1:
            from fakeupstream import free_port_pair  # the tests' own helper: one free port

            first_udp, first_tcp, self.port = free_port_pair(host)
            udps, tcps = [first_udp], [first_tcp]
        else:
            udps, tcps = self._reuseport_sockets(host, udp, tcp)
        for s in udps:
            try:
                s.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RECEIVE_BUFFER)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RECEIVE_BUFFER)
            self.sockets.append(("dns-udp", s))
        for s in tcps:
            s.listen(1024)
            self.sockets.append(("dns-tcp", s))
        self.paths = {}
        for name in unix:
            path = (paths or {}).get(name) or str(workdir / f"launcher-{name}.sock")
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.bind(path)
            # The modes nscache.socket gives: control 0600, the fronts 0666.
            os.chmod(path, 0o600 if name == "control" else 0o666)
            s.listen(4096)
            self.sockets.append((name, s))
            self.paths[name] = path
        self.running = None

    def _reuseport_sockets(self, host, udp, tcp, attempts=20):
        # Several sockets on one port: SO_REUSEPORT on each, as ReusePort=yes in a socket unit
        # (or one per worker of a running nscache). A port another test took meanwhile: again.
        last = None
        for _ in range(attempts):
            made = []
            try:
                port = 0
                for kind, count in ((socket.SOCK_DGRAM, udp), (socket.SOCK_STREAM, tcp)):
                    for _ in range(count):
                        s = socket.socket(socket.AF_INET, kind)
                        made.append(s)
                        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
                        s.bind((host, port))
                        port = s.getsockname()[1]
                self.port = port
                return ([s for s in made if s.type == socket.SOCK_DGRAM],
                        [s for s in made if s.type == socket.SOCK_STREAM])
            except OSError as e:
                last = e
                for s in made:
                    s.close()
        raise last

    @property
    def address(self):
        return f"{self.host}:{self.port}"

    def wrapper(self):
        names = ":".join(name for name, _ in self.sockets)
        fds = ",".join(str(s.fileno()) for _, s in self.sockets)
        return [sys.executable, os.path.abspath(__file__), fds, names, "--"]

    def start(self, daemon, upstreams, **kwargs):
        """Starts `nscache serve` through the `daemon` fixture's factory on these sockets."""
        d = daemon(upstreams, wrapper=self.wrapper(), pass_fds=[s.fileno() for _, s in self.sockets],
                   **kwargs)
        self.running = d
        return d

    def restart(self, daemon, upstreams, **kwargs):
        """SIGTERM the running daemon, wait for its exit (its code is returned with the new
        Daemon), start the next one on the same sockets."""
        old = self.running
        code = old.stop(timeout=30) if old is not None else None
        return self.start(daemon, upstreams, **kwargs), code

    def close(self):
        for _, s in self.sockets:
            s.close()
        for path in self.paths.values():
            try:
                if stat.S_ISSOCK(os.lstat(path).st_mode):
                    os.unlink(path)
            except FileNotFoundError:
                pass


def _bound(host, kind, port):
    s = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, kind)
    if kind == socket.SOCK_STREAM:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((host, port))
    return s


def _exec_with_listen_fds(argv):
    """The wrapper: FDS NAMES -- PROGRAM ARGS... (the daemon's process from here on)."""
    fds = [int(f) for f in argv[0].split(",")]
    names = argv[1]
    program = argv[3:]
    # Out of the way first (a passed descriptor may sit where another must go), then 3, 4, ...
    high = [_dup_above(fd, 3 + len(fds)) for fd in fds]
    for fd in fds:
        os.close(fd)
    for i, fd in enumerate(high):
        os.dup2(fd, 3 + i)  # dup2 leaves the copy inheritable
        os.close(fd)
    env = dict(os.environ)
    env["LISTEN_FDS"] = str(len(fds))
    env["LISTEN_FDNAMES"] = names
    env["LISTEN_PID"] = str(os.getpid())
    os.execvpe(program[0], program, env)


def _dup_above(fd, minimum):
    import fcntl
    return fcntl.fcntl(fd, fcntl.F_DUPFD, minimum)


if __name__ == "__main__":
    _exec_with_listen_fds(sys.argv[1:])
