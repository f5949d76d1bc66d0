# SPDX-License-Identifier: BSD-3-Clause
"""What a packager and an administrator rely on beyond the daemon's behaviour: hardened
binaries (the NSS module is loaded into setuid programs) and a systemd unit that waits for
readiness and bounds the daemon's memory."""

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from harness import REPO


def _readelf(*args):
    tool = shutil.which("readelf")
    if tool is None:
        pytest.skip("readelf is not installed")
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=30, check=True).stdout


@pytest.fixture(scope="module")
def built(nscache):
    binary = Path(nscache)
    module = binary.parent / "nss" / "libnss_nscache.so.2"
    if "libasan" in _readelf("-d", str(binary)) or "libtsan" in _readelf("-d", str(binary)):
        pytest.skip("a sanitizer build carries its own checks instead of the hardening flags")
    return [binary, module]


def test_binaries_have_full_relro_and_bind_now(built):
    for path in built:
        assert "GNU_RELRO" in _readelf("-lW", str(path)), f"{path}: no RELRO segment"
        dynamic = _readelf("-dW", str(path))
        assert re.search(r"\(FLAGS\)\s+.*BIND_NOW", dynamic) or re.search(r"\(FLAGS_1\)\s+.*NOW", dynamic), \
            f"{path}: not linked with -z now"


def test_binaries_have_stack_protector_and_fortify(built):
    daemon_symbols = _readelf("--dyn-syms", "-W", str(built[0]))
    assert "__stack_chk_fail" in daemon_symbols, "daemon built without -fstack-protector-strong"
    assert re.search(r"__\w+_chk@", daemon_symbols), "daemon built without _FORTIFY_SOURCE"
    assert "__stack_chk_fail" in _readelf("--dyn-syms", "-W", str(built[1])), \
        "NSS module built without -fstack-protector-strong"


def test_unit_waits_for_readiness_and_bounds_memory():
    unit = (REPO / "packaging" / "nscache.service.in").read_text()
    settings = dict(re.findall(r"(?m)^(\w+)=(.*)$", unit))
    assert settings.get("Type") == "notify"
    assert settings.get("NotifyAccess") == "main"
    assert re.fullmatch(r"\d+[KMG]?", settings.get("MemoryMax", "")), "no MemoryMax"
    assert int(settings.get("LimitNOFILE", "0")) >= 65536
    assert "Before=nss-lookup.target" in unit
