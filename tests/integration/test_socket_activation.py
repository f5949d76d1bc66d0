# SPDX-License-Identifier: BSD-3-Clause
"""Socket activation (issue 20, item 1): the daemon serves on the sockets it is given
(LISTEN_FDS, as systemd's nscache.socket gives them) instead of binding, and a restart on
those sockets loses no query. socket_launcher.py plays systemd."""

import os
import time
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


def test_listen_addresses_the_given_sockets_lack_are_bound_beside_them(daemon, fake_upstream, launcher):
    """Socket units for 127.0.0.1 and a `listen` that also names 127.0.0.2: both are served
    (the units must not silently replace the configured addresses)."""
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    l = launcher()
    d = l.start(daemon, fake_upstream.addr, listen=("127.0.0.1:0", "127.0.0.2:0"))
    log = d.stderr_text()
    assert f"serving the given DNS sockets: udp {l.address}, tcp {l.address}" in log, log
    other = d.listening[("udp", "127.0.0.2")]
    assert d.listening[("tcp", "127.0.0.2")] == other
    assert f"listen addresses bound beside them: udp 127.0.0.2:{other}, tcp 127.0.0.2:{other}" in log, log
    for host, port in (("127.0.0.1", l.port), ("127.0.0.2", other)):
        assert a_addrs(udp(port, "www.fake.test.", host=host)) == ["192.0.2.10"]
        assert a_addrs(tcp(port, "www.fake.test.", host=host)) == ["192.0.2.10"]
    assert d.stop() == 0


@pytest.mark.parametrize("sockets,threads", [(1, 3), (2, 2), (4, 2)])
def test_several_workers_share_or_split_the_given_sockets(daemon, fake_upstream, launcher, sockets, threads):
    """One socket for three workers: shared (each polls it); as many as the workers (or a
    multiple, SO_REUSEPORT on one port): one each. Every query is answered either way."""
    from steady_load import SteadyLoad, unanswered

    for i in range(50):
        fake_upstream.add(f"s{i}.fake.test.", "A", 300, "192.0.2.77")
    l = launcher(udp=sockets, tcp=sockets)
    l.start(daemon, fake_upstream.addr, threads=threads)
    queries = SteadyLoad(l.port, lambda i: f"s{i % 50}.fake.test.", rate=500, duration=1.0).start().join()
    assert not unanswered(queries, within=3.0)
    assert all(q.a_addrs() == ["192.0.2.77"] for q in queries)
    for _ in range(2 * sockets):
        assert a_addrs(tcp(l.port, "s1.fake.test.")) == ["192.0.2.77"]


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


CACHED = 1000
MISS_EVERY = 50  # one query in 50 is a name never asked before (through the 200 ms upstream)


def _restart_upstream(fake):
    import dns.rrset

    def generate(qname, rdtype):
        label = qname.labels[0].decode()
        if rdtype != 1 or label[:1] not in ("c", "m") or not label[1:].isdigit():
            return None
        i = int(label[1:])
        return [dns.rrset.from_text(qname, 3600, "IN", "A", f"198.51.{i // 250 % 250}.{i % 250 + 1}")]

    fake.generator = generate
    # Only the misses wait 200 ms: the cached names are filled fast (a thread per delayed
    # answer in the fake upstream cannot keep up with 1,000 at once: timeouts, then cached
    # failures, would spoil the warm-up).
    for i in range(MISS_EVERY - 1, 100_000, MISS_EVERY):
        fake.delays[f"m{i}.fake.test."] = 200


def _expected(name):
    i = int(name.split(".")[0][1:])
    return [f"198.51.{i // 250 % 250}.{i % 250 + 1}"]


def _pick(i):
    if i % MISS_EVERY == MISS_EVERY - 1:
        return f"m{i}.fake.test."
    return f"c{i % CACHED}.fake.test."


def test_restart_under_load_loses_nothing_and_starts_warm(daemon, fake_upstream, launcher, tmp_path):
    from steady_load import SteadyLoad, unanswered

    _restart_upstream(fake_upstream)
    cache_file = tmp_path / "cache.bin"
    config = f'cache-file = "{cache_file}"\nstate-dir = "{tmp_path}"\n'
    l = launcher()
    d1 = l.start(daemon, fake_upstream.addr, config=config)
    # Filled at a pace the fake upstream (a thread per delayed answer) keeps up with.
    warm = SteadyLoad(l.port, lambda i: f"c{i}.fake.test.", rate=1000, duration=CACHED / 1000).start()
    warmed = warm.join()
    missing = [q for q in unanswered(warmed, within=3.0)] + [q for q in warmed if q.rcode() not in (None, 0)]
    assert not missing, f"{len(missing)} warm-up queries unanswered or failed"
    fake_upstream.clear_queries()

    load = SteadyLoad(l.port, _pick, rate=3000, duration=5.0).start()
    time.sleep(1.5)
    stopping = time.monotonic()
    d2, code = l.restart(daemon, fake_upstream.addr, config=config)
    queries = load.join()
    assert code == 0, d1.stderr_text()[-3000:]
    old_log = d1.stderr_text()
    assert "draining" in old_log and "saved" in old_log, old_log[-3000:]

    lost = unanswered(queries, within=2.0)
    assert not lost, (f"{len(lost)} of {len(queries)} queries unanswered within 2 s, first at "
                      f"{lost[0].sent - stopping:+.3f} s from SIGTERM\nold:\n{old_log[-2000:]}\n"
                      f"new:\n{d2.stderr_text()[-2000:]}")
    bad = [(q.name, q.rcode(), round(q.sent - stopping, 3), round(q.latency, 3)) for q in queries if q.rcode() != 0]
    assert not bad, f"answers not NOERROR (name, rcode, sent after SIGTERM, latency): {bad[:10]}\n" \
        f"old:\n{old_log[-2000:]}\nnew:\n{d2.stderr_text()[-2000:]}"
    # Misses in flight at SIGTERM, and every other, carry the upstream's data.
    for q in queries:
        assert q.a_addrs() == _expected(q.name), (q.name, q.a_addrs())
    in_flight = [q for q in queries if q.name.startswith("m") and q.sent < stopping < q.answered]
    assert in_flight, "no miss was in flight at SIGTERM: the test did not test the drain"

    # The new process's first second: its cached names come from the cache file.
    exited = stopping + (d1.proc.returncode is not None and 0)  # SIGTERM sent at `stopping`
    first_second = {q.name for q in queries
                    if q.name.startswith("c") and exited <= q.sent and q.answered and
                    q.answered > stopping and q.sent < stopping + 1.0}
    asked_upstream = {e["name"] for e in fake_upstream.queries if e["time"] >= stopping}
    warm_hits = [n for n in first_second if n.lower() not in asked_upstream]
    assert first_second, "no cached name was queried around the restart"
    assert len(warm_hits) >= 0.95 * len(first_second), \
        f"{len(first_second) - len(warm_hits)} of {len(first_second)} cached names went upstream"


def test_drain_answers_the_miss_in_flight_while_control_answers_and_fronts_are_closed(daemon, fake_upstream):
    """SIGTERM with a miss waiting on a slow upstream: the daemon keeps running until it is
    answered (with the upstream's data); meanwhile the control socket answers and the NSS
    socket is gone (its clients fall back at once instead of waiting in a backlog)."""
    import signal
    import socket as socketlib

    from dnshelpers import make_query, wait_until

    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.99")
    fake_upstream.delays["slow.fake.test."] = 1500
    d = daemon(fake_upstream.addr)
    nss_socket = d.workdir / "nss.sock"
    assert nss_socket.exists()
    client = socketlib.socket(socketlib.AF_INET, socketlib.SOCK_DGRAM)
    client.settimeout(10)
    client.sendto(make_query("slow.fake.test.", "A").to_wire(), ("127.0.0.1", d.port))
    assert wait_until(lambda: fake_upstream.count(name="slow.fake.test.") == 1)
    d.stopped_by_test = True
    os.kill(d.pid, signal.SIGTERM)
    assert wait_until(lambda: "draining" in d.stderr_text()), d.stderr_text()
    assert d.proc.poll() is None, "exited before the miss in flight was answered"
    assert not nss_socket.exists()
    r = d.cli("stats", "--control", d.control)
    assert r.returncode == 0, f"control did not answer during the drain: {r.stdout}{r.stderr}"
    import dns.message
    reply = dns.message.from_wire(client.recvfrom(4096)[0])
    assert reply.rcode() == 0 and [rd.address for rrset in reply.answer for rd in rrset] == ["192.0.2.99"]
    assert d.proc.wait(10) == 0
    assert "drained in" in d.stderr_text()
    client.close()


def test_drain_of_its_own_sockets_refuses_new_queries_at_once(daemon, fake_upstream):
    """Sockets the daemon bound itself (no socket activation, no takeover): once the drain
    begins, a new UDP query is refused (ICMP port unreachable: ECONNREFUSED on a connected
    socket, the stub's cue to try its next server) and a TCP connect too, instead of waiting
    unread for query-timeout; the miss already in flight is still answered."""
    import signal
    import socket as socketlib

    import dns.message
    from dnshelpers import make_query, wait_until

    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.99")
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    fake_upstream.delays["slow.fake.test."] = 1500  # within the retry timeout
    d = daemon(fake_upstream.addr)
    assert a_addrs(udp(d.port, "www.fake.test.")) == ["192.0.2.10"]
    client = socketlib.socket(socketlib.AF_INET, socketlib.SOCK_DGRAM)
    client.settimeout(10)
    client.sendto(make_query("slow.fake.test.", "A").to_wire(), ("127.0.0.1", d.port))
    assert wait_until(lambda: fake_upstream.count(name="slow.fake.test.") >= 1)
    d.stopped_by_test = True
    os.kill(d.pid, signal.SIGTERM)
    assert wait_until(lambda: "draining" in d.stderr_text()), d.stderr_text()

    def refused():
        with socketlib.socket(socketlib.AF_INET, socketlib.SOCK_DGRAM) as late:
            late.connect(("127.0.0.1", d.port))
            late.settimeout(0.2)
            late.send(make_query("www.fake.test.", "A").to_wire())
            try:
                late.recv(4096)
                return False  # answered: not refused (yet)
            except ConnectionRefusedError:
                return d.proc.poll() is None  # refused by the draining daemon, not a gone one
            except socketlib.timeout:
                return False

    assert wait_until(refused, timeout=1.0), "a UDP query during the drain was not refused"
    assert d.proc.poll() is None, "exited before the miss in flight was answered"
    with socketlib.socket(socketlib.AF_INET, socketlib.SOCK_STREAM) as late_tcp:
        with pytest.raises(ConnectionRefusedError):
            late_tcp.connect(("127.0.0.1", d.tcp_port))
    reply = dns.message.from_wire(client.recvfrom(4096)[0])
    assert [rd.address for rrset in reply.answer for rd in rrset] == ["192.0.2.99"]
    assert d.proc.wait(10) == 0
    client.close()


def test_the_stop_asks_systemd_for_time_for_the_drain_and_the_save(daemon, fake_upstream, tmp_path):
    """TimeoutStopSec= may be shorter than a drain (query-timeout) plus the cache file's
    save: the daemon extends it (EXTEND_TIMEOUT_USEC) for each, so systemd does not SIGKILL
    it while it saves."""
    import socket as socketlib

    notify = socketlib.socket(socketlib.AF_UNIX, socketlib.SOCK_DGRAM)
    notify_path = tmp_path / "notify.sock"
    notify.bind(str(notify_path))
    notify.settimeout(10)
    cache_file = tmp_path / "cache.bin"
    d = daemon(fake_upstream.addr, config=f'cache-file = "{cache_file}"\nstate-dir = "{tmp_path}"\n',
               extra_env={"NOTIFY_SOCKET": str(notify_path)})
    messages = []
    while "READY=1" not in messages:
        messages.append(notify.recv(4096).decode())
    assert d.stop() == 0
    after = []
    while len(after) < 3:
        after.append(notify.recv(4096).decode())
    assert after[0] == "STOPPING=1", after
    extends = [int(m.split("=", 1)[1]) for m in after[1:] if m.startswith("EXTEND_TIMEOUT_USEC=")]
    assert len(extends) == 2, after
    assert extends[0] >= 2_000_000 + 1_000_000  # the drain: query-timeout (2 s) and its margin
    assert extends[1] >= 10_000_000  # the save
    notify.close()


def test_a_second_sigterm_ends_the_drain_at_once_and_still_saves_the_cache(daemon, fake_upstream, tmp_path):
    import signal

    from dnshelpers import make_query, wait_until

    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.99")
    fake_upstream.add("www.fake.test.", "A", 300, "192.0.2.10")
    fake_upstream.mode = "normal"
    cache_file = tmp_path / "cache.bin"
    d = daemon(fake_upstream.addr, config=f'cache-file = "{cache_file}"\nstate-dir = "{tmp_path}"\n')
    assert a_addrs(udp(d.port, "www.fake.test.")) == ["192.0.2.10"]
    fake_upstream.mode = "drop"  # the miss below is never answered: only the deadline would end it
    import socket as socketlib
    client = socketlib.socket(socketlib.AF_INET, socketlib.SOCK_DGRAM)
    client.sendto(make_query("slow.fake.test.", "A").to_wire(), ("127.0.0.1", d.port))
    assert wait_until(lambda: fake_upstream.count(name="slow.fake.test.") >= 1)
    d.stopped_by_test = True
    os.kill(d.pid, signal.SIGTERM)
    assert wait_until(lambda: "draining" in d.stderr_text())
    os.kill(d.pid, signal.SIGTERM)
    assert d.proc.wait(10) == 0
    log = d.stderr_text()
    assert "drain cut short by a second signal" in log, log
    assert "saved" in log and cache_file.exists(), log
    client.close()


def test_drain_delivers_a_large_tcp_answer_despite_a_query_sent_after_sigterm(daemon, fake_upstream):
    """The review of issue 20 (finding 3): with the answer still in the daemon's send queue (a
    client that reads slowly) and a query the client sent after SIGTERM unread, the drain's
    close() sent RST and the kernel dropped the rest of the answer."""
    import signal
    import socket as socketlib
    import struct
    import time

    from dnshelpers import make_query, tcp, wait_until

    strings = [f'"{i:03d}{"x" * 237}"' for i in range(120)]  # ~30 KB of TXT
    fake_upstream.add("big.fake.test.", "TXT", 300, *strings)
    d = daemon(fake_upstream.addr, threads=1)
    assert len(tcp(d.port, "big.fake.test", "TXT").answer[0]) == 120  # cached now
    s = socketlib.socket(socketlib.AF_INET, socketlib.SOCK_STREAM)
    s.setsockopt(socketlib.SOL_SOCKET, socketlib.SO_RCVBUF, 4096)
    s.settimeout(10)
    s.connect(("127.0.0.1", d.port))
    q1 = make_query("big.fake.test", "TXT").to_wire()
    s.sendall(struct.pack("!H", len(q1)) + q1)
    time.sleep(0.3)  # the answer is written: most of it waits in the daemon's send queue
    d.stopped_by_test = True
    os.kill(d.pid, signal.SIGTERM)
    assert wait_until(lambda: "draining" in d.stderr_text()), d.stderr_text()
    q2 = make_query("www.fake.test", "A").to_wire()
    s.sendall(struct.pack("!H", len(q2)) + q2)
    time.sleep(0.3)  # q2 reaches the daemon before the client reads on
    data = b""
    while True:
        try:
            chunk = s.recv(65536)
        except ConnectionResetError:
            break
        if not chunk:
            break
        data += chunk
    s.close()
    assert len(data) >= 2, "nothing of the answer arrived"
    (length,) = struct.unpack("!H", data[:2])
    assert len(data) >= 2 + length, f"{len(data) - 2} of {length} bytes of the answer arrived"
    import dns.message
    reply = dns.message.from_wire(data[2:2 + length])
    assert len(reply.answer[0]) == 120
    assert d.proc.wait(10) == 0
