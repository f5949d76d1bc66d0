# SPDX-License-Identifier: BSD-3-Clause
"""Shared data and process helpers of the integration tests (zone contents, the repo path,
stopping processes). Test modules import from here, never from conftest (tests/integration/nss
has a conftest.py of its own, and only one module can be called `conftest`)."""

import os
import shutil
import signal
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
NSD_BIN = shutil.which("nsd") or "/usr/sbin/nsd"

# --------------------------------------------------------------------------------------
# Zone data served by NSD (generated at run time, never committed).
# --------------------------------------------------------------------------------------

ZONE = "example.test"
SOA_TTL = 600
SOA_MINIMUM = 60  # RFC 2308 negative TTL = min(600, 60) = 60
LOWTTL_ZONE = "lowttl.test"
LOWTTL_SOA_TTL = 45
LOWTTL_SOA_MINIMUM = 3600  # negative TTL = min(45, 3600) = 45
BULK_COUNT = 200
BIG_TXT_STRINGS = 6  # 6 x 250-byte strings: the answer is > 1232 bytes


def bulk_addr(i):
    return f"198.18.{i // 250}.{i % 250 + 1}"


def big_txt_strings():
    return [(chr(ord("a") + i) * 250) for i in range(BIG_TXT_STRINGS)]


EXPECTED = {
    "www": ("A", 300, ["192.0.2.1"]),
    "short": ("A", 2, ["192.0.2.2"]),
    "v6only": ("AAAA", 300, ["2001:db8::6"]),
    "dual-a": ("A", 300, ["192.0.2.3"]),
    "dual-aaaa": ("AAAA", 300, ["2001:db8::3"]),
}


def example_zone_text():
    lines = [
        f"$ORIGIN {ZONE}.",
        "$TTL 300",
        f"@ {SOA_TTL} IN SOA ns1.{ZONE}. hostmaster.{ZONE}. 2024010101 3600 900 604800 {SOA_MINIMUM}",
        f"@ {SOA_TTL} IN NS ns1.{ZONE}.",
        "ns1 300 IN A 127.0.0.1",
        "www 300 IN A 192.0.2.1",
        "short 2 IN A 192.0.2.2",
        "short3 3 IN A 192.0.2.4",
        "v6only 300 IN AAAA 2001:db8::6",
        "dual 300 IN A 192.0.2.3",
        "dual 300 IN AAAA 2001:db8::3",
        "alias 300 IN CNAME www",
        "multi 300 IN A 192.0.2.11",
        "multi 300 IN A 192.0.2.12",
        "multi 300 IN A 192.0.2.13",
    ]
    for s in big_txt_strings():
        lines.append(f'big 300 IN TXT "{s}"')
    for i in range(BULK_COUNT):
        lines.append(f"bulk{i} 300 IN A {bulk_addr(i)}")
    return "\n".join(lines) + "\n"


def lowttl_zone_text():
    return "\n".join([
        f"$ORIGIN {LOWTTL_ZONE}.",
        f"@ {LOWTTL_SOA_TTL} IN SOA ns1.{LOWTTL_ZONE}. hostmaster.{LOWTTL_ZONE}. 1 3600 900 604800 {LOWTTL_SOA_MINIMUM}",
        f"@ {LOWTTL_SOA_TTL} IN NS ns1.{LOWTTL_ZONE}.",
        "ns1 300 IN A 127.0.0.1",
        "www 300 IN A 192.0.2.50",
    ]) + "\n"



def stop_process(proc, timeout=5):
    if proc.poll() is not None:
        return proc.returncode
    try:
        os.kill(proc.pid, signal.SIGTERM)
    except ProcessLookupError:
        pass
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=5)
        return None


_stop_pid = stop_process


def skip_if_sanitized(why="UBSan's vptr check needs a free descriptor (it probes memory "
                                             "through a pipe): with every descriptor taken on "
                                             "purpose it reports false errors"):
    import pytest
    if os.environ.get("NSCACHE_SANITIZED"):
        pytest.skip(f"sanitizer build: {why}")


def clean_env():
    env = dict(os.environ)
    env.pop("JOURNAL_STREAM", None)  # plain `LEVEL: message` log lines
    env.pop("NOTIFY_SOCKET", None)
    return env
