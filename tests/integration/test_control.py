"""The control socket and its client subcommands: stats, flush, dump, load, cache-file."""

import json
import os
import re
import socket
import stat
import time

import dns.rcode
import pytest

from dnshelpers import a_addrs, udp

STATS_KEYS = [
    "queries", "queries_udp", "queries_tcp", "cache_hits", "cache_misses", "hit_ratio",
    "cache_entries", "cache_bytes", "cache_budget_bytes", "evictions", "expirations",
    "upstream_queries", "upstream_timeouts", "upstream_errors", "upstream_tcp_retries",
    "dropped_mismatched", "coalesced", "answers_servfail", "answers_formerr", "answers_notimp",
    "answers_refused", "answers_truncated", "upstreams",
]


def control_request(path, line, timeout=5):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout)
        s.connect(path)
        s.sendall(line.encode() + b"\n")
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    return data.decode()


def test_stats_json_has_every_key(daemon, fake_upstream):
    fake_upstream.add("k.fake.test.", "A", 300, "192.0.2.90")
    d = daemon(fake_upstream.addr, extra_args=["--cache-size", "8M"])
    udp(d.port, "k.fake.test")
    udp(d.port, "k.fake.test")
    s = d.stats()
    missing = [k for k in STATS_KEYS if k not in s]
    assert not missing, f"stats lacks {missing}"
    for k in STATS_KEYS:
        if k not in ("upstreams", "hit_ratio"):
            assert isinstance(s[k], int) and s[k] >= 0, (k, s[k])
    assert s["cache_budget_bytes"] == 8 * 1024 * 1024
    assert s["queries"] >= 2 and s["queries_udp"] >= 2
    assert s["cache_hits"] >= 1 and s["cache_misses"] >= 1
    assert abs(s["hit_ratio"] - s["cache_hits"] / (s["cache_hits"] + s["cache_misses"])) < 0.01
    assert s["cache_entries"] >= 1 and 0 < s["cache_bytes"] <= s["cache_budget_bytes"]
    assert s["upstream_queries"] >= 1
    assert len(s["upstreams"]) == 1
    assert str(fake_upstream.port) in str(s["upstreams"][0]["address"])
    assert s["upstreams"][0]["queries"] >= 1


def test_stats_text(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    r = d.cli("stats", "--control", d.control)
    assert r.returncode == 0, r.stderr
    names = {}
    for line in r.stdout.splitlines():
        if not line.strip():
            continue
        parts = line.split()
        assert len(parts) >= 2, f"not a `name value` line: {line!r}"
        names[parts[0]] = parts[1]
    for k in ("queries", "cache_hits", "upstream_queries"):
        assert k in names, f"{k} missing from text stats:\n{r.stdout}"


def test_control_protocol_raw(daemon, fake_upstream):
    d = daemon(fake_upstream.addr)
    mode = stat.S_IMODE(os.stat(d.control).st_mode)
    assert mode == 0o600, f"control socket mode {oct(mode)}"
    text = control_request(d.control, "stats")
    assert text.splitlines()[0] == "ok", text
    text = control_request(d.control, "stats json")
    first, _, rest = text.partition("\n")
    assert first == "ok"
    assert "queries" in json.loads(rest)
    text = control_request(d.control, "no-such-command")
    assert text.splitlines()[0].startswith("error:"), text
    text = control_request(d.control, "flush")
    assert text.splitlines()[0] == "ok" and re.search(r"flushed \d+ entries", text), text
    # still alive and serving control after the bad request
    assert d.stats()["queries"] >= 0


@pytest.mark.threaded
def test_flush_all(daemon, fake_upstream):
    for n in ("a", "b"):
        fake_upstream.add(f"{n}.fake.test.", "A", 300, "192.0.2.91")
    d = daemon(fake_upstream.addr)
    for _ in range(2):
        udp(d.port, "a.fake.test")
        udp(d.port, "b.fake.test")
    assert fake_upstream.count(name="a.fake.test") == 1 and fake_upstream.count(name="b.fake.test") == 1
    r = d.flush()
    assert re.search(r"flushed [1-9]\d* entries", r.stdout + r.stderr), r.stdout
    assert a_addrs(udp(d.port, "a.fake.test")) == ["192.0.2.91"]
    assert a_addrs(udp(d.port, "b.fake.test")) == ["192.0.2.91"]
    assert fake_upstream.count(name="a.fake.test") == 2
    assert fake_upstream.count(name="b.fake.test") == 2


def test_flush_name(daemon, fake_upstream):
    for n in ("keep", "drop"):
        fake_upstream.add(f"{n}.fake.test.", "A", 300, "192.0.2.92")
    d = daemon(fake_upstream.addr)
    udp(d.port, "keep.fake.test")
    udp(d.port, "drop.fake.test")
    udp(d.port, "drop.fake.test", "AAAA")
    r = d.flush("drop.fake.test")
    assert re.search(r"flushed [1-9]\d* entries", r.stdout + r.stderr), r.stdout
    udp(d.port, "keep.fake.test")
    udp(d.port, "DROP.fake.test")
    assert fake_upstream.count(name="keep.fake.test") == 1, "flush NAME removed another name"
    assert fake_upstream.count("udp", name="drop.fake.test") == 3
    # the nonexistent name flushes nothing but succeeds
    r = d.flush("never-seen.fake.test")
    assert re.search(r"flushed 0 entries", r.stdout + r.stderr), r.stdout


@pytest.mark.threaded
def test_dump_and_load(daemon, fake_upstream, tmp_path):
    for i in range(3):
        fake_upstream.add(f"d{i}.fake.test.", "A", 300, f"192.0.2.{93 + i}")
    d1 = daemon(fake_upstream.addr)
    for i in range(3):
        udp(d1.port, f"d{i}.fake.test")
    dumpfile = tmp_path / "cache.dump"
    r = d1.cli("dump", "--control", d1.control, str(dumpfile))
    assert r.returncode == 0, r.stderr
    m = re.search(r"dumped (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) >= 3, r.stdout + r.stderr
    assert dumpfile.exists() and dumpfile.stat().st_size > 0
    d2 = daemon(fake_upstream.addr)
    r = d2.cli("load", "--control", d2.control, str(dumpfile))
    assert r.returncode == 0, r.stderr
    m = re.search(r"loaded (\d+) entries", r.stdout + r.stderr)
    assert m and int(m.group(1)) >= 3, r.stdout + r.stderr
    before = sum(fake_upstream.count(name=f"d{i}.fake.test") for i in range(3))
    for i in range(3):
        r = udp(d2.port, f"d{i}.fake.test")
        assert a_addrs(r) == [f"192.0.2.{93 + i}"]
        assert r.answer[0].ttl <= 300
    assert sum(fake_upstream.count(name=f"d{i}.fake.test") for i in range(3)) == before, \
        "loaded entries were not used"


def test_cache_file_survives_restart(daemon, fake_upstream, tmp_path):
    fake_upstream.add("persist.fake.test.", "A", 300, "192.0.2.97")
    cache_file = tmp_path / "nscache.cache"
    cfg = f'cache-file = "{cache_file}"\n'
    d1 = daemon(fake_upstream.addr, config=cfg)
    udp(d1.port, "persist.fake.test")
    assert d1.stop() == 0, d1.stderr_text()
    assert cache_file.exists(), "cache-file was not written on shutdown"
    d2 = daemon(fake_upstream.addr, config=cfg)
    r = udp(d2.port, "persist.fake.test")
    assert a_addrs(r) == ["192.0.2.97"]
    assert fake_upstream.count(name="persist.fake.test") == 1


def test_load_missing_file_fails(daemon, fake_upstream, tmp_path):
    d = daemon(fake_upstream.addr)
    r = d.cli("load", "--control", d.control, str(tmp_path / "absent.dump"))
    assert r.returncode != 0
    assert d.proc.poll() is None
    assert udp(d.port, "whatever.fake.test").rcode() == dns.rcode.NXDOMAIN


def _free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_get(port, path, timeout=5):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
        data = b""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head.decode("latin-1"), body.decode("utf-8", "replace")


def test_metrics_endpoint(daemon, fake_upstream):
    fake_upstream.add("m.fake.test.", "A", 300, "192.0.2.98")
    port = _free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    udp(d.port, "m.fake.test")
    udp(d.port, "m.fake.test")
    head, body = _http_get(port, "/metrics")
    assert head.split("\r\n")[0].split()[1] == "200", head
    samples = [l for l in body.splitlines() if l and not l.startswith("#")]
    assert samples, body
    for l in samples:
        assert re.match(r"^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[^}]*\})? [-+0-9.eEInfNa]+$", l), f"not a Prometheus sample: {l!r}"
    assert any(l.startswith("nscache_") for l in samples), body[:500]
