# SPDX-License-Identifier: BSD-3-Clause
"""The nscd socket across `nscache serve --takeover` (issue 20, item 3): glibc's getaddrinfo,
through its built-in nscd client, in a loop across the takeover, never fails. The name is one
only nscache's upstream knows (NSD, what `files dns` would ask, has no such name), so every
answer comes from nscache: the old one's map until it retires it, then the socket (the same
socket, now served by the new one) and the new one's map."""

import os
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from nscdenv import SOCKET  # noqa: E402

ONLY_NSCACHE = "onlycache.example.test"


def test_getaddrinfo_never_fails_across_a_takeover(nscd_ns, ns_nsd, client, daemon, fake_upstream):
    fake_upstream.add(ONLY_NSCACHE + ".", "A", 300, "198.51.100.123")
    wrapper = ["nsenter", "-t", str(nscd_ns.pid), "--mount", "--"]

    def start(*more, listen=("127.0.0.1:0",)):
        return daemon([fake_upstream.addr], threads=1, listen=listen, wrapper=wrapper,
                      extra_args=["--nscd-socket", SOCKET, *more])

    old = start()
    assert "addr 198.51.100.123" in client.out("gai", ONLY_NSCACHE, "4", "-")[1], old.stderr_text()
    loop = nscd_ns.popen([client.bin, "loop", "4", ONLY_NSCACHE, "4", "-"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    time.sleep(1.0)
    new = start("--control", old.control, "--nss-socket", str(old.workdir / "nss.sock"),
                "--takeover", listen=(f"127.0.0.1:{old.port}",))
    new.control = old.control
    old.stopped_by_test = True  # it exits by itself
    out, _ = loop.communicate(timeout=60)
    try:
        code = old.proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        code = None
    assert loop.returncode == 0 and out.startswith("ok "), \
        f"{out}\nold:\n{old.stderr_text()[-2000:]}\nnew:\n{new.stderr_text()[-2000:]}"
    assert code == 0, old.stderr_text()[-3000:]
    assert "nscd socket" in new.stderr_text()
    # The socket is still there (the old one left it), served by the new one.
    assert os.path.exists(f"/proc/{nscd_ns.pid}/root/run/nscd/socket")
    assert "addr 198.51.100.123" in client.out("gai", ONLY_NSCACHE, "4", "-")[1], new.stderr_text()
