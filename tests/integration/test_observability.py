# SPDX-License-Identifier: BSD-3-Clause
"""What an operator watches (issue 10, item 6): answer latency by source (cache, upstream,
stale) as a Prometheus histogram, per-upstream-server counters, round-trip time and state,
per-group (forwarding rule) counts, in `nscache stats` and on the metrics endpoint; and the log
lines for a refused config, an upstream marked down, and the cache file."""

import json
import re
import socket
import time

import dns.rcode

from dnshelpers import a_addrs, udp

SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? ([-+0-9.eEInfNa]+)$")


def free_tcp_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def scrape(port):
    """{(name, frozenset of label pairs): value} from GET /metrics."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.0\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    head, _, body = data.decode().partition("\r\n\r\n")
    assert head.split()[1] == "200", head
    out = {}
    for line in body.splitlines():
        if not line or line.startswith("#"):
            continue
        m = SAMPLE.match(line)
        assert m, f"not a Prometheus sample: {line!r}"
        labels = frozenset(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        key = (m.group(1), labels)
        assert key not in out, f"sample twice: {line!r}"
        out[key] = float(m.group(3))
    return out


def value(metrics, name, **labels):
    return metrics[(name, frozenset(labels.items()))]


def latency(metrics, source):
    """(count, sum, {le: cumulative count}) of one source's histogram."""
    buckets = {dict(k[1])["le"]: v for k, v in metrics.items()
               if k[0] == "nscache_answer_latency_seconds_bucket" and dict(k[1])["source"] == source}
    return (value(metrics, "nscache_answer_latency_seconds_count", source=source),
            value(metrics, "nscache_answer_latency_seconds_sum", source=source), buckets)


def check_histogram_shape(metrics):
    for source in ("cache", "upstream", "stale"):
        count, total, buckets = latency(metrics, source)
        bounds = sorted((float(le), v) for le, v in buckets.items())
        assert bounds[-1][0] == float("inf") and bounds[-1][1] == count, (source, bounds)
        assert all(a[1] <= b[1] for a, b in zip(bounds, bounds[1:])), f"{source}: not cumulative: {bounds}"
        if count == 0:
            assert total == 0, f"{source}: a sum of {total} over no answers"


def test_metrics_latency_by_source_and_upstream_series_move(daemon, fake_upstream):
    fake_upstream.add("lat.fake.test.", "A", 300, "192.0.2.61")
    fake_upstream.add("exp.fake.test.", "A", 1, "192.0.2.62")
    port = free_tcp_port()
    d = daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\nserve-expired = true\n')
    up = {"forward": ".", "upstream": fake_upstream.addr}
    m0 = scrape(port)
    check_histogram_shape(m0)
    assert value(m0, "nscache_upstream_server_up", **up) == 1

    # A miss: answered from upstream; the set and its server count it.
    assert a_addrs(udp(d.port, "lat.fake.test")) == ["192.0.2.61"]
    m1 = scrape(port)
    assert latency(m1, "upstream")[0] == latency(m0, "upstream")[0] + 1
    assert latency(m1, "cache")[0] == latency(m0, "cache")[0]
    assert latency(m1, "upstream")[1] > 0, "an upstream answer takes some time on the loop's clock"
    assert value(m1, "nscache_forward_questions_total", forward=".") == \
        value(m0, "nscache_forward_questions_total", forward=".") + 1
    assert value(m1, "nscache_upstream_server_queries_total", **up) == \
        value(m0, "nscache_upstream_server_queries_total", **up) + 1
    assert value(m1, "nscache_upstream_server_answers_total", **up) == \
        value(m0, "nscache_upstream_server_answers_total", **up) + 1
    assert value(m1, "nscache_upstream_server_srtt_seconds", **up) > 0

    # Two hits: the cache series moves, at zero latency, and nothing else does.
    udp(d.port, "lat.fake.test")
    udp(d.port, "lat.fake.test")
    m2 = scrape(port)
    count, total, buckets = latency(m2, "cache")
    assert count == latency(m1, "cache")[0] + 2
    assert buckets["0.0001"] == count and total == latency(m1, "cache")[1]
    assert count == value(m2, "nscache_cache_hits_total")
    assert latency(m2, "upstream")[0] == latency(m1, "upstream")[0]
    assert value(m2, "nscache_upstream_server_queries_total", **up) == \
        value(m1, "nscache_upstream_server_queries_total", **up)

    # An expired entry with serve-expired: a stale answer at once.
    assert a_addrs(udp(d.port, "exp.fake.test")) == ["192.0.2.62"]
    time.sleep(1.2)
    assert a_addrs(udp(d.port, "exp.fake.test")) == ["192.0.2.62"]
    m3 = scrape(port)
    assert latency(m3, "stale")[0] == latency(m2, "stale")[0] + 1
    check_histogram_shape(m3)


def test_dead_upstream_shows_down_with_timeouts_failures_and_slow_servfails(daemon, dead_upstream):
    dead = dead_upstream()
    port = free_tcp_port()
    d = daemon(dead.addr, config=f'metrics-listen = "127.0.0.1:{port}"\nquery-timeout = "600ms"\n'
                                 'serve-stale = false\n')
    for i in range(3):  # three questions, each timing out at least once
        r = udp(d.port, f"q{i}.dead.test", timeout=5)
        assert r.rcode() == dns.rcode.SERVFAIL
    assert "marked down" in d.stderr_text(), d.stderr_text()
    up = {"forward": ".", "upstream": dead.addr}
    m = scrape(port)
    assert value(m, "nscache_upstream_server_up", **up) == 0
    assert value(m, "nscache_upstream_server_timeouts_total", **up) >= 3
    assert value(m, "nscache_upstream_server_answers_total", **up) == 0
    assert value(m, "nscache_forward_failures_total", forward=".") == 3
    assert value(m, "nscache_forward_questions_total", forward=".") == 3
    # Each SERVFAIL came at query-timeout, not before the tries ran out: none is in a bucket
    # far below the 600 ms timeout.
    count, total, buckets = latency(m, "upstream")
    assert count == 3 and buckets["0.25"] == 0 and buckets["+Inf"] == 3, (count, total, buckets)

    # The same through `nscache stats`: JSON and text.
    s = d.stats()
    assert s["forwards"] == [{"name": ".", "questions": 3, "failures": 3}]
    (u,) = s["upstreams"]
    assert u["address"] == dead.addr and u["forward"] == "." and u["up"] is False
    assert u["timeouts"] >= 3 and u["answers"] == 0
    assert s["answer_latency"]["upstream"]["count"] == 3
    assert len(s["answer_latency"]["upstream"]["buckets"]) == len(s["latency_bucket_bounds_us"]) + 1
    text = d.cli("stats", "--control", d.control).stdout
    assert "forward . questions=3 failures=3" in text, text
    assert re.search(rf"(?m)^upstream {re.escape(dead.addr)} forward=\. srtt_ms=[0-9.]+ queries=\d+ answers=0 "
                     r"errors=0 timeouts=\d+ down$", text), text
    assert re.search(r"(?m)^latency_upstream count=3 mean_ms=[0-9.]+ p50_ms=[0-9.]+ p99_ms=[0-9.]+$", text), text


def test_refused_config_is_logged_with_level_and_reason(nscache, tmp_path):
    import subprocess
    from harness import clean_env
    bad = tmp_path / "bad.toml"
    bad.write_text('threads = 1\ncache-size = "lots"\n')
    r = subprocess.run([nscache, "serve", "--config", str(bad), "--listen", "127.0.0.1:0",
                        "--upstream", "127.0.0.1:9", "--control", str(tmp_path / "c.sock")],
                       capture_output=True, text=True, timeout=10, env=clean_env())
    assert r.returncode == 2
    assert re.search(rf"(?m)^error: config refused: {re.escape(str(bad))}:2:", r.stderr), r.stderr


def test_cache_file_save_and_load_and_control_dump_are_logged(daemon, fake_upstream, tmp_path):
    fake_upstream.add("keep.fake.test.", "A", 300, "192.0.2.63")
    cache_file = tmp_path / "state" / "nscache.cache"
    cache_file.parent.mkdir()
    config = f'cache-file = "{cache_file}"\nstate-dir = "{cache_file.parent}"\n'
    d = daemon(fake_upstream.addr, config=config)
    assert f"no cache file {cache_file} yet: starting empty" in d.stderr_text()
    udp(d.port, "keep.fake.test")
    r = d.cli("dump", "--control", d.control, "snapshot.dump")
    assert r.returncode == 0, r.stderr
    assert d.stop() == 0
    log = d.stderr_text()
    assert re.search(rf"(?m)^info: control: dumped 1 entries to {re.escape(str(cache_file.parent))}/snapshot.dump$",
                     log), log
    assert re.search(rf"(?m)^info: saved 1 entries to {re.escape(str(cache_file))}$", log), log
    d2 = daemon(fake_upstream.addr, config=config)
    assert re.search(rf"(?m)^info: loaded 1 entries from {re.escape(str(cache_file))} in \d+ ms$", d2.stderr_text())
    assert json.loads(d2.cli("stats", "--control", d2.control, "--json").stdout)["cache_entries"] == 1


def test_grafana_dashboard_uses_only_metrics_the_daemon_exposes(daemon, fake_upstream):
    from harness import REPO
    dashboard = json.loads((REPO / "packaging" / "grafana-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["definition"] for v in dashboard["templating"]["list"]]
    used = {re.sub(r"_(bucket|sum|count)$", "", n) for e in exprs for n in re.findall(r"\bnscache_\w+", e)}
    port = free_tcp_port()
    daemon(fake_upstream.addr, config=f'metrics-listen = "127.0.0.1:{port}"\n')
    exposed = {re.sub(r"_(bucket|sum|count)$", "", name) for name, _ in scrape(port)}
    assert used and used <= exposed, f"the dashboard names metrics nscache does not expose: {used - exposed}"
    labels = {l for e in exprs for l in re.findall(r"by \(([^)]*)\)", e) for l in l.replace(" ", "").split(",")}
    assert labels <= {"instance", "le", "source", "forward", "upstream"}, labels
