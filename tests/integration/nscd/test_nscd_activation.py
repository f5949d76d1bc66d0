# SPDX-License-Identifier: BSD-3-Clause
"""The nscd socket under socket activation (issue 20): glibc's getaddrinfo, through its
built-in nscd client, in a loop across a restart on the launcher's sockets, never fails. The
name is one only nscache's upstream knows (NSD, what `files dns` would ask, has no such
name), so every answer comes from nscache: the map while it is published, or the socket,
whose connections wait in the launcher's backlog while the process is replaced."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nscdenv import SOCKET  # noqa: E402
from socket_launcher import SocketLauncher  # noqa: E402

ONLY_NSCACHE = "onlycache.example.test"


def test_getaddrinfo_never_fails_across_a_restart(nscd_ns, ns_nsd, client, daemon, fake_upstream, tmp_path):
    fake_upstream.add(ONLY_NSCACHE + ".", "A", 300, "198.51.100.123")
    # The socket at the namespaces' /run/nscd/socket, bound from here through their root.
    ns_run = Path(f"/proc/{nscd_ns.pid}/root/run/nscd")
    ns_run.mkdir(parents=True, exist_ok=True)
    launcher = SocketLauncher(tmp_path, unix=("nscd",), paths={"nscd": str(ns_run / "socket")})
    try:
        wrapper = launcher.wrapper() + ["nsenter", "-t", str(nscd_ns.pid), "--mount", "--"]
        fds = [s.fileno() for _, s in launcher.sockets]
        cache_file = tmp_path / "cache.bin"
        config = f'cache-file = "{cache_file}"\nstate-dir = "{tmp_path}"\n'

        def start():
            return daemon([fake_upstream.addr], config=config, threads=1,
                          extra_args=["--nscd-socket", SOCKET], wrapper=wrapper, pass_fds=fds)

        d1 = start()
        assert "addr 198.51.100.123" in client.out("gai", ONLY_NSCACHE, "4", "-")[1], d1.stderr_text()
        loop = nscd_ns.popen([client.bin, "loop", "4", ONLY_NSCACHE, "4", "-"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        time.sleep(1.0)
        assert d1.stop(timeout=30) == 0, d1.stderr_text()[-3000:]
        d2 = start()
        out, _ = loop.communicate(timeout=60)
        assert loop.returncode == 0 and out.startswith("ok "), \
            f"{out}\nold:\n{d1.stderr_text()[-2000:]}\nnew:\n{d2.stderr_text()[-2000:]}"
        assert os.path.exists(ns_run / "socket"), "the daemon unlinked the launcher's socket"
    finally:
        launcher.close()


def test_own_user_lookups_do_not_wait_on_the_inherited_socket(nscd_ns, client, daemon, fake_upstream, tmp_path):
    """The inherited nscd socket listens before the front serves it: the daemon's own getpwnam
    and initgroups (`--user`) go through glibc's nscd client to it, and would each wait
    glibc's 5 s for an answer (the start took over 10 s before the refuser): connections are
    closed at once until the front accepts, so glibc asks `files` straight."""
    fake_upstream.add(ONLY_NSCACHE + ".", "A", 300, "198.51.100.123")
    ns_run = Path(f"/proc/{nscd_ns.pid}/root/run/nscd")
    ns_run.mkdir(parents=True, exist_ok=True)
    launcher = SocketLauncher(tmp_path, unix=("nscd",), paths={"nscd": str(ns_run / "socket")})
    try:
        d = daemon([fake_upstream.addr], threads=1, extra_args=["--nscd-socket", SOCKET, "--user", "nobody"],
                   wrapper=launcher.wrapper() + ["nsenter", "-t", str(nscd_ns.pid), "--mount", "--"],
                   pass_fds=[s.fileno() for _, s in launcher.sockets])
        assert "running as user nobody" in d.stderr_text()
        assert "addr 198.51.100.123" in client.out("gai", ONLY_NSCACHE, "4", "-")[1], d.stderr_text()
    finally:
        launcher.close()
