# SPDX-License-Identifier: BSD-3-Clause
"""Socket activation (issue 20, item 1): the daemon serves on the sockets it is given
(LISTEN_FDS, as systemd's nscache.socket gives them) instead of binding, and a restart on
those sockets loses no query. socket_launcher.py plays systemd."""

import os
import subprocess

import pytest

from dnshelpers import a_addrs, tcp, udp
from harness import clean_env
from socket_launcher import SocketLauncher


@pytest.fixture
def launcher(tmp_path):
    made = []

    def make(**kwargs):
        launcher = SocketLauncher(tmp_path, **kwargs)
        made.append(launcher)
        return launcher

    yield make
    for launcher in made:
        launcher.close()


def test_serves_udp_tcp_and_control_on_inherited_sockets(daemon, fake_upstream, launcher):
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    l = launcher(unix=("control",))
    d = l.start(daemon, fake_upstream.addr)
    assert "socket activation: 3 sockets given" in d.stderr_text()
    assert a_addrs(udp(l.port, "www.fake.test.")) == ["192.0.2.10"]
    assert a_addrs(tcp(l.port, "www.fake.test.")) == ["192.0.2.10"]
    # The control socket is the launcher's, not the one the flags name.
    r = d.cli("stats", "--control", l.paths["control"])
    assert r.returncode == 0, r.stdout + r.stderr
    assert not os.path.exists(d.control)
    assert d.stop() == 0
    # Its owner keeps the path: the daemon never unlinks an inherited socket.
    assert os.path.exists(l.paths["control"])


def test_without_listen_pid_of_its_own_the_variables_are_ignored(daemon, fake_upstream):
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    d = daemon(fake_upstream.addr, extra_env={"LISTEN_PID": "1", "LISTEN_FDS": "2",
                                               "LISTEN_FDNAMES": "dns-udp:dns-tcp"})
    assert "socket activation" not in d.stderr_text()
    assert a_addrs(udp(d.port, "www.fake.test.")) == ["192.0.2.10"]


@pytest.mark.parametrize("names,why", [
    ("dns-udp:dns-udp", "is not a datagram socket"),
    ("dns-tcp:bogus", "unknown name 'bogus'"),
    ("dns-udp", "LISTEN_FDS says 2 descriptors but LISTEN_FDNAMES names 1"),
])
def test_wrong_descriptors_are_a_config_error(nscache, tmp_path, launcher, names, why):
    l = launcher()  # descriptor 3: dns-udp, 4: dns-tcp
    wrapper = l.wrapper()
    wrapper[3] = names
    r = subprocess.run(wrapper + [nscache, "serve", "--upstream", "127.0.0.1:9", "--control",
                                  str(tmp_path / "c.sock"), "--nss-socket", str(tmp_path / "n.sock")],
                       pass_fds=[s.fileno() for _, s in l.sockets], capture_output=True, text=True,
                       timeout=20, env=clean_env())
    assert r.returncode == 2, r.stderr
    assert why in r.stderr
