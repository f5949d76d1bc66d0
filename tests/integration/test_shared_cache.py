"""The shared second-level cache in Redis (issue 12), against real redis-server processes on
loopback: two daemons sharing one Redis, Redis stopped and killed under load, garbage and forged
values, and a 3-node Redis Cluster with a node killed and slots moved during load.

Every redis-server is started by the test on a free port (or a unix socket in its folder) and
stopped by PID; the daemons always have NSD (or a fake upstream) as their upstream.
"""

import os
import shutil
import socket
import struct
import threading
import time

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest

from harness import ZONE, bulk_addr, BULK_COUNT
from dnshelpers import a_addrs, answer_ttl, make_query, soa_ttl, udp, wait_until
from redishelpers import REDIS_CLI, REDIS_SERVER, RedisServer, create_cluster, reshard

pytestmark = pytest.mark.skipif(not os.path.exists(REDIS_SERVER) or not os.path.exists(REDIS_CLI),
                                reason="redis-server and redis-cli are not installed")

PREFIX = "nscache:"


def tier_config(redis=None, cluster=None, timeout="300ms", extra=""):
    lines = ["[shared-cache]"]
    if redis:
        lines.append(f'redis = "{redis}"')
    if cluster:
        lines.append("redis-cluster = [" + ", ".join(f'"{n}"' for n in cluster) + "]")
    lines.append(f'timeout = "{timeout}"')
    return "\n".join(lines) + "\n" + extra


def key_of(name, rdtype=1, rdclass=1, flags=0):
    return f"{PREFIX}1:{name.lower().rstrip('.')}.:{rdtype}:{rdclass}:{flags}"


@pytest.fixture
def redis_server(tmp_path):
    """Factory of redis-server processes, all stopped by PID at teardown."""
    made = []

    def make(**kw):
        r = RedisServer(str(tmp_path / f"redis{len(made)}"), **kw)
        made.append(r)
        return r

    try:
        yield make
    finally:
        for r in made:
            r.stop()


# --------------------------------------------------------------------------------------
# 1. Two daemons, one Redis: the second one's miss is the first one's answer.
# --------------------------------------------------------------------------------------

def test_second_daemon_answers_from_redis_with_ttl_counting_down(daemon, nsd, redis_server):
    redis = redis_server(unix=True)
    config = tier_config(redis=redis.address)
    first = daemon(nsd.addr, config=config)
    second = daemon(nsd.addr, config=config)
    name = f"www.{ZONE}"
    nx = f"nothing-here.{ZONE}"

    a = udp(first.port, name)
    assert a_addrs(a) == ["192.0.2.1"] and answer_ttl(a) == 300
    assert udp(first.port, nx).rcode() == dns.rcode.NXDOMAIN
    # Written in the background: both keys appear, with Redis's expiry at the answer's TTL.
    assert wait_until(lambda: redis.command("EXISTS", key_of(name)) == 1 and
                      redis.command("EXISTS", key_of(nx)) == 1, timeout=5)
    assert 299_000 <= redis.command("PTTL", key_of(name)) <= 300_000
    assert 59_000 <= redis.command("PTTL", key_of(nx)) <= 60_000  # RFC 2308: min(600, 60)
    assert first.stats()["shared_writes"] == 2

    time.sleep(1.1)  # so that a TTL that keeps counting shows it
    b = udp(second.port, name)
    assert a_addrs(b) == ["192.0.2.1"]
    assert 298 <= answer_ttl(b) <= 299
    n = udp(second.port, nx)
    assert n.rcode() == dns.rcode.NXDOMAIN and 58 <= soa_ttl(n) <= 59
    s = second.stats()
    assert s["upstream_queries"] == 0, s
    assert s["shared_hits"] == 2 and s["shared_writes"] == 0
    assert s["shared_cache_state"] == "up"
    # Inserted locally: asked again, a local hit, Redis not involved.
    assert a_addrs(udp(second.port, name)) == ["192.0.2.1"]
    s2 = second.stats()
    assert s2["shared_lookups"] == s["shared_lookups"] and s2["cache_hits"] == s["cache_hits"] + 1


# --------------------------------------------------------------------------------------
# 2. Redis stopped (SIGSTOP), resumed, killed (SIGKILL) and restarted under a query load:
#    no DNS answer lost, local hits never go to Redis, the tier goes down and comes back.
# --------------------------------------------------------------------------------------

class Load:
    """Client threads asking, in turn, a name that misses (a fresh nonexistent name: NXDOMAIN
    from NSD) and one of `hits` (cached before the load starts). Every reply is checked."""

    def __init__(self, port, hits, threads=3):
        self.port = port
        self.hits = hits
        self.stop_flag = threading.Event()
        self.lock = threading.Lock()
        self.answered = 0
        self.problems = []
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True)
                        for i in range(threads)]

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def stop(self):
        self.stop_flag.set()
        for t in self.threads:
            t.join(10)

    def _ask(self, name, want):
        try:
            r = udp(self.port, name, timeout=3.0)
        except Exception as e:  # a lost answer
            return f"{name}: {type(e).__name__}"
        got = a_addrs(r) if want is not None else None
        if want is None and r.rcode() != dns.rcode.NXDOMAIN:
            return f"{name}: {dns.rcode.to_text(r.rcode())}, expected NXDOMAIN"
        if want is not None and got != [want]:
            return f"{name}: {got} ({dns.rcode.to_text(r.rcode())}), expected {want}"
        return None

    def _run(self, index):
        i = 0
        while not self.stop_flag.is_set():
            name, want = self.hits[(index * 7 + i) % len(self.hits)]
            for args in ((f"miss-{index}-{i}.{ZONE}", None), (name, want)):
                problem = self._ask(*args)
                with self.lock:
                    self.answered += 1
                    if problem:
                        self.problems.append(problem)
            i += 1


def test_redis_stopped_and_killed_under_load(daemon, nsd, redis_server):
    redis = redis_server()
    port = redis.port
    d = daemon(nsd.addr, config=tier_config(redis=redis.address, timeout="200ms"))
    hits = [(f"bulk{i}.{ZONE}", bulk_addr(i)) for i in range(40)]
    for name, want in hits:
        assert a_addrs(udp(d.port, name)) == [want]

    # A local hit involves no Redis at all, even while Redis hangs.
    redis.pause()
    before = d.stats()
    for name, want in hits:
        assert a_addrs(udp(d.port, name)) == [want]
    after = d.stats()
    assert after["cache_hits"] == before["cache_hits"] + len(hits)
    assert after["shared_lookups"] == before["shared_lookups"]
    redis.resume()

    load = Load(d.port, hits).start()
    try:
        assert wait_until(lambda: load.answered > 50, timeout=10)
        redis.pause()
        # Misses wait at most the timeout; after three failures in a row the tier is down and
        # misses go straight upstream.
        assert wait_until(lambda: d.stats()["shared_cache_state"] == "down", timeout=10)
        down = d.stats()
        assert down["shared_timeouts"] > 0
        assert wait_until(lambda: d.stats()["shared_skipped"] > down["shared_skipped"], timeout=5)
        redis.resume()
        # Probed once a second: up again, and lookups flow again.
        assert wait_until(lambda: d.stats()["shared_cache_state"] == "up", timeout=10)
        up = d.stats()
        assert wait_until(lambda: d.stats()["shared_lookups"] > up["shared_lookups"], timeout=5)

        redis.kill()
        assert wait_until(lambda: d.stats()["shared_cache_state"] == "down", timeout=10)
        assert d.stats()["shared_errors"] > 0
        answered = load.answered
        assert wait_until(lambda: load.answered > answered + 50, timeout=10)

        # A new Redis on the same port: the probe finds it.
        redis_server(port=port)
        assert wait_until(lambda: d.stats()["shared_cache_state"] == "up", timeout=10)
        back = d.stats()
        assert wait_until(lambda: d.stats()["shared_writes"] > back["shared_writes"], timeout=5)
    finally:
        load.stop()
    assert load.problems == [], load.problems[:10]
    assert load.answered > 200
