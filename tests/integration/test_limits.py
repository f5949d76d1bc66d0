# SPDX-License-Identifier: BSD-3-Clause
"""Limits that keep one client, one upstream or one operator mistake from taking the daemon
down (issue 9): the in-flight cap answered without re-entering TCP, descriptor exhaustion
without a busy loop, TCP connection caps and deadlines, one instance per runtime path,
readiness notification, and config bounds."""

import os
import socket
import struct
import subprocess
import time

import dns.message
import dns.rcode
import pytest

from harness import ZONE, skip_if_sanitized
from dnshelpers import closed_within, a_addrs, make_query, rcode_of, tcp_raw_exchange, udp, udp_raw, wait_until


def _cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime + stime



# The audit's crash: with every upstream slot of the worker taken, a TCP client's misses were
# answered from inside the resolver, which re-entered the connection's parser.
def test_tcp_misses_over_the_inflight_cap_get_servfail_and_nothing_breaks(daemon, fake_upstream):
    fake_upstream.add("held.fake.test.", "A", 300, "192.0.2.1")
    fake_upstream.delay_ms = 1500
    d = daemon(fake_upstream.addr, threads=1, config="max-upstream-queries = 1\n")
    # Occupies the worker's only upstream slot.
    holder = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    holder.sendto(make_query("held.fake.test", "A", qid=1).to_wire(), ("127.0.0.1", d.port))
    assert wait_until(lambda: fake_upstream.count() >= 1, timeout=3)
    queries = [make_query(f"m{i}.fake.test", "A", qid=100 + i).to_wire() for i in range(40)]
    raw = tcp_raw_exchange(d.tcp_port, queries, timeout=5)
    assert len(raw) == 40, f"{len(raw)} of 40 pipelined answers"
    assert sorted(struct.unpack("!H", w[:2])[0] for w in raw) == list(range(100, 140))
    rcodes = [rcode_of(w) for w in raw]
    assert set(rcodes) == {dns.rcode.SERVFAIL}, sorted(set(rcodes))
    assert d.stats()["overload_servfail"] >= 40
    holder.settimeout(5)
    reply = dns.message.from_wire(holder.recv(4096))
    assert a_addrs(reply) == ["192.0.2.1"]
    holder.close()
    assert d.proc.poll() is None


def test_out_of_descriptors_does_not_spin_and_recovers(daemon, nsd):
    skip_if_sanitized()
    d = daemon(nsd.addr, threads=None, wrapper=["prlimit", "--nofile=160:160", "--"],
               config="max-tcp-connections = 1000\n" 'tcp-idle-timeout = "60s"\n',
               extra_args=["--threads", "1"])
    conns = []
    try:
        for i in range(220):  # more than the daemon has descriptors for
            try:
                # Several source addresses: the per-client cap must not be what stops them.
                conns.append(socket.create_connection(("127.0.0.1", d.tcp_port), timeout=2,
                                                      source_address=(f"127.0.1.{i % 8 + 1}", 0)))
            except OSError:
                break
        time.sleep(0.3)
        before, t0 = _cpu_seconds(d.pid), time.monotonic()
        time.sleep(2.0)
        used = _cpu_seconds(d.pid) - before
        wall = time.monotonic() - t0
        assert used < 0.5 * wall, f"daemon used {used:.2f} s of CPU in {wall:.2f} s while out of descriptors"
        # Log lines are rate-limited: a busy loop writes one per turn (blocking on the pipe).
        lines = [l for l in d.stderr_text().splitlines() if "out of" in l and "descriptors" in l]
        assert 1 <= len(lines) < 20, f"{len(lines)} log lines about running out of descriptors"
        assert "max-upstream-queries lowered" in d.stderr_text()
    finally:
        for c in conns:
            c.close()
    assert wait_until(lambda: a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"], timeout=5)
    assert d.proc.poll() is None


def test_tcp_client_outside_allow_is_closed_at_accept(daemon, nsd):
    d = daemon(nsd.addr, config='allow = ["192.0.2.0/24"]\n')
    with socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5) as s:
        # Not a byte sent: a connection that is allowed would wait for its query.
        assert closed_within(s, 3), "a disallowed TCP client was kept"
    assert wait_until(lambda: d.stats()["tcp_rejected"] >= 1)


def test_per_client_tcp_cap(daemon, nsd):
    d = daemon(nsd.addr, config='max-tcp-per-client = 3\ntcp-idle-timeout = "30s"\n')
    kept = [socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5) for _ in range(3)]
    try:
        assert wait_until(lambda: d.stats()["tcp_connections"] >= 3)
        with socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5) as extra:
            assert closed_within(extra, 3), "a fourth connection from one address was kept"
        # Another loopback address is another client.
        with socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5, source_address=("127.0.0.2", 0)) as other:
            w = make_query(f"www.{ZONE}", "A").to_wire()
            other.sendall(struct.pack("!H", len(w)) + w)
            other.settimeout(5)
            assert len(other.recv(4096)) > 2
    finally:
        for c in kept:
            c.close()


def test_slowloris_query_is_cut_off(daemon, nsd):
    d = daemon(nsd.addr, config='tcp-idle-timeout = "30s"\ntcp-read-timeout = "1s"\n')
    w = make_query(f"www.{ZONE}", "A").to_wire()
    framed = struct.pack("!H", len(w)) + w
    with socket.create_connection(("127.0.0.1", d.tcp_port), timeout=5) as s:
        closed = False
        for i in range(len(framed) - 1):  # a byte every 0.3 s: never a whole query
            try:
                s.sendall(framed[i:i + 1])
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_within(s, 0.3):
                closed = True
                break
        assert closed, "a query trickling in a byte at a time kept its connection open"
        assert i < 12, f"closed only after {i + 1} bytes (~{0.3 * (i + 1):.1f} s)"


def test_second_instance_with_the_same_paths_touches_nothing(daemon, nsd, tmp_path):
    first = daemon(nsd.addr)
    assert a_addrs(udp(first.port, f"www.{ZONE}")) == ["192.0.2.1"]
    nss_socket = first.workdir / "nss.sock"
    before = os.stat(nss_socket).st_ino
    # Same control and NSS socket paths, another port.
    second = daemon(nsd.addr, expect_ready=False,
                    extra_args=["--control", first.control, "--nss-socket", str(nss_socket)])
    second.proc.wait(timeout=10)
    second.stopped_by_test = True
    assert second.proc.returncode == 1
    assert f"pid {first.pid}" in second.stderr_text() and "another nscache" in second.stderr_text()
    assert os.stat(nss_socket).st_ino == before, "the second instance replaced the NSS socket"
    assert first.stats()["queries"] >= 1  # the first one's control socket still answers
    assert a_addrs(udp(first.port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_ready_is_notified_after_the_cache_file_is_loaded(daemon, nsd, tmp_path):
    cache_file = tmp_path / "cache.bin"
    first = daemon(nsd.addr, config=f'cache-file = "{cache_file}"\n')
    assert a_addrs(udp(first.port, f"www.{ZONE}")) == ["192.0.2.1"]
    assert first.stop() == 0 and cache_file.exists()

    notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    notify_path = tmp_path / "notify.sock"
    notify.bind(str(notify_path))
    notify.settimeout(10)
    d = daemon(nsd.addr, config=f'cache-file = "{cache_file}"\n', extra_env={"NOTIFY_SOCKET": str(notify_path)})
    messages = []
    while "READY=1" not in messages:
        messages.append(notify.recv(4096).decode())
    # At READY=1 the cache is loaded: the entry is there before anyone asked.
    assert d.stats()["cache_entries"] >= 1
    assert d.stop() == 0
    assert "STOPPING=1" in notify.recv(4096).decode()
    notify.close()


def test_too_many_upstreams_is_a_config_error(nscache, tmp_path):
    upstreams = ", ".join(f'"127.0.0.1:{10000 + i}"' for i in range(65))
    conf = tmp_path / "n.toml"
    conf.write_text(f"upstream = [{upstreams}]\n")
    r = subprocess.run([nscache, "check-config", str(conf)], capture_output=True, text=True, timeout=10)
    assert r.returncode == 2 and "at most 64 upstreams" in r.stderr, r.stderr


def test_switching_user_hands_over_the_state_dir_only(daemon, nsd, nscache):
    if os.geteuid() != 0:
        pytest.skip("needs root to switch users")
    import pwd
    import shutil
    import tempfile
    nobody = pwd.getpwnam("nobody")
    base = tempfile.mkdtemp(dir="/tmp")
    try:
        os.chmod(base, 0o755)
        state = os.path.join(base, "state")
        d = daemon(nsd.addr, config=f'user = "nobody"\nstate-dir = "{state}"\n')
        assert "running as user nobody" in d.stderr_text()
        st = os.stat(state)
        assert (st.st_uid, st.st_gid) == (nobody.pw_uid, nobody.pw_gid)
        # The runtime folder (here the test's) and the sockets in it stay root's.
        assert os.stat(d.workdir / "nss.sock").st_uid == 0
        assert os.stat(d.control).st_uid in (0, nobody.pw_uid)
        assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]
        r = subprocess.run([nscache, "dump", "--control", d.control, "snap"], capture_output=True,
                           text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        assert os.stat(os.path.join(state, "snap")).st_uid == nobody.pw_uid
    finally:
        shutil.rmtree(base, ignore_errors=True)
