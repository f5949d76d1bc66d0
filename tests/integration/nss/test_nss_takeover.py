# SPDX-License-Identifier: BSD-3-Clause
"""libnss_nscache.so.2 across `nscache serve --takeover` (issue 20, item 3): one process keeps
resolving through the module while a new daemon takes the running one's sockets over; every
lookup succeeds (from nscache, or for a moment from dns, never an error) and, once the old one
is gone, answers come from the new one's map."""

import subprocess
import time

from test_nss_daemon import RESTART_CLIENT


def test_a_process_resolves_throughout_a_takeover(netns, nss_daemon, dns_nsd, tmp_path):
    first = nss_daemon()
    script = tmp_path / "client.py"
    script.write_text(RESTART_CLIENT)
    go, done = tmp_path / "go", tmp_path / "done"
    proc = netns.popen(["/usr/bin/python3", str(script), str(go), str(done)], stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(1.0)
        second = nss_daemon(same_paths_as=first, extra_args=[
            "--control", first.daemon.control, "--listen", f"127.0.0.1:{first.daemon.port}",
            "--takeover"])
        second.daemon.control = first.daemon.control
        first.daemon.stopped_by_test = True  # it exits by itself
        assert first.daemon.proc.wait(timeout=15) == 0, first.daemon.stderr_text()
        time.sleep(2.0)  # the module looks at a dead map again within a second
        before = second.stats()["nss_requests"]
        go.touch()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=5)
    lines = [l.split() for l in out.splitlines()]
    assert done.exists(), err
    good = {("192.0.2.3", "2001:db8::3"), ("198.51.100.3", "2001:db8:53::3")}  # nscache, or dns
    assert all(tuple(l[1:]) in good for l in lines), out
    phase2 = [tuple(l[1:]) for l in lines if l[0] == "phase2"]
    assert phase2 == [("192.0.2.3", "2001:db8::3")] * 20, out
    assert second.stats()["nss_requests"] - before <= 1, "the process did not reopen the new map"
    assert "takeover: the previous instance drains" in second.daemon.stderr_text()
