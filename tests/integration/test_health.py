# SPDX-License-Identifier: BSD-3-Clause
"""The health endpoint (issue 20 item 4): `health-listen`, GET/HEAD /health (liveness) and
/ready (readiness: 503 while starting or draining), 404 and 405, bounded requests, sharing
the metrics address, and a reload that moves it."""

import os
import signal
import socket
import subprocess
import threading
import time

import dns.message
import dns.query
import pytest

from dnshelpers import wait_until


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(port, request, timeout=5):
    """The raw request's whole answer, as (status, head, body); status None if none came."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(request)
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                chunk = s.recv(65536)
            except ConnectionResetError:
                break
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    line = head.split(b"\r\n", 1)[0].split()
    status = int(line[1]) if len(line) > 1 else None
    return status, head.decode("latin-1"), body.decode("utf-8", "replace")


def get(port, path, method="GET"):
    return http(port, f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())


def test_health_and_ready_answer_200_once_ready(daemon, fake_upstream):
    port = free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'health-listen = "127.0.0.1:{port}"\n')
    assert f"health on http://127.0.0.1:{port}/health" in d.stderr_text()
    status, _, body = get(port, "/health")
    assert (status, body) == (200, "ok\n")
    status, head, body = get(port, "/ready")
    assert (status, body) == (200, "ok\n")
    assert "Content-Length: 3" in head
    status, _, _ = get(port, "/ready?verbose=1")  # a query string is not part of the path
    assert status == 200


def test_head_404_405_and_bad_requests(daemon, fake_upstream):
    port = free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'health-listen = "127.0.0.1:{port}"\n')
    status, head, body = get(port, "/health", method="HEAD")
    assert status == 200 and body == "" and "Content-Length: 3" in head
    assert get(port, "/metrics")[0] == 404  # metrics live on metrics-listen only
    assert get(port, "/")[0] == 404
    status, head, _ = get(port, "/ready", method="POST")
    assert status == 405 and "Allow: GET, HEAD" in head
    assert get(port, "/nothing", method="DELETE")[0] == 404
    assert http(port, b"GARBAGE\r\n\r\n")[0] == 400
    # A head longer than the bound (4 KiB) is refused, not read on.
    status, _, _ = http(port, b"GET /health HTTP/1.1\r\nX-Pad: " + b"a" * 8000 + b"\r\n\r\n")
    assert status == 431
    # The daemon still answers afterwards.
    assert get(port, "/health")[0] == 200
    d.stop()


def test_silent_clients_are_closed_and_cannot_lock_out_probes(daemon, fake_upstream):
    port = free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'health-listen = "127.0.0.1:{port}"\n')
    idle = []
    try:
        for _ in range(40):  # more than the 16 served at once
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            idle.append(s)
        # Held clients are turned away at accept or closed by the 5 s deadline: a probe gets
        # through within that.
        assert wait_until(lambda: _probe_ok(port), timeout=15)
        # And the silent ones were closed by the server (recv sees the end, never an answer).
        idle[0].settimeout(10)
        assert idle[0].recv(100) == b""
    finally:
        for s in idle:
            s.close()


def _probe_ok(port):
    try:
        return get(port, "/health")[0] == 200
    except OSError:
        return False


def test_health_shares_the_metrics_address(daemon, fake_upstream):
    port = free_tcp_port()
    d = daemon(fake_upstream.addr,
               config=f'metrics-listen = "127.0.0.1:{port}"\nhealth-listen = "127.0.0.1:{port}"\n')
    assert get(port, "/metrics")[0] == 200
    assert get(port, "/health")[0] == 200
    assert get(port, "/ready")[0] == 200
    status, head, body = get(port, "/metrics", method="HEAD")
    assert status == 200 and body == ""


def test_metrics_alone_does_not_answer_health(daemon, fake_upstream):
    port = free_tcp_port()
    daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    assert get(port, "/metrics")[0] == 200
    assert get(port, "/health")[0] == 404
    assert get(port, "/metrics", method="PUT")[0] == 405


def test_reload_moves_the_health_endpoint(daemon, fake_upstream, nscache):
    first, second = free_tcp_port(), free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'health-listen = "127.0.0.1:{first}"\n')
    assert get(first, "/ready")[0] == 200
    (d.workdir / "nscache.toml").write_text(f'health-listen = "127.0.0.1:{second}"\n')
    r = subprocess.run([nscache, "reload", "--control", d.control], capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stdout + r.stderr
    assert wait_until(lambda: "changed health-listen" in d.stderr_text(), timeout=5)
    assert wait_until(lambda: _probe_ok(second), timeout=5)
    with pytest.raises(OSError):
        get(first, "/health")
    # Off again.
    (d.workdir / "nscache.toml").write_text("")
    assert subprocess.run([nscache, "reload", "--control", d.control], capture_output=True,
                          timeout=30).returncode == 0
    assert wait_until(lambda: not _probe_ok(second), timeout=5)


def test_bad_health_listen_is_a_config_error(nscache, tmp_path):
    conf = tmp_path / "bad.toml"
    conf.write_text('health-listen = "localhost"\n')
    r = subprocess.run([nscache, "check-config", str(conf)], capture_output=True,
                       text=True, timeout=10)
    assert r.returncode != 0
    assert "health-listen" in r.stdout + r.stderr and "expected ADDR:PORT" in r.stdout + r.stderr


def test_ready_is_503_while_draining_and_health_stays_200(daemon, fake_upstream):
    port = free_tcp_port()
    fake_upstream.add("slow.fake.test.", "A", 300, "192.0.2.7")
    # Within the upstream's retry timeout, so the one answer that comes is the one served.
    fake_upstream.delays["slow.fake.test."] = 1500
    d = daemon(fake_upstream.addr, config=f'health-listen = "127.0.0.1:{port}"\n')
    assert get(port, "/ready")[0] == 200
    answer = {}

    def ask():
        q = dns.message.make_query("slow.fake.test", "A")
        answer["r"] = dns.query.udp(q, "127.0.0.1", port=d.port, timeout=5)

    t = threading.Thread(target=ask)
    t.start()
    assert wait_until(lambda: fake_upstream.count(name="slow.fake.test.") >= 1, timeout=3)
    d.stopped_by_test = True  # it exits by itself once drained: checked below
    os.kill(d.pid, signal.SIGTERM)
    # The query is in flight for about 1.5 s: the drain waits for it, the endpoint answers
    # (the signal is read on the supervisor's next turn: asked until it has been).
    assert wait_until(lambda: get(port, "/ready")[:3:2] == (503, "draining\n"), timeout=1.5)
    assert get(port, "/health")[0] == 200
    t.join(10)
    assert answer["r"].answer, "the in-flight query was answered during the drain"
    assert d.proc.wait(10) == 0
