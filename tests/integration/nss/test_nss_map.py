# SPDX-License-Identifier: BSD-3-Clause
"""The shared map's reader (src/nss/map_reader.c) against a seqlock writer of its own
(tests/nss/map_reader_test.c): the reader's rules one by one, then a writer process hammering
colliding slots while reader threads in three processes check every hit is whole, unexpired
and of the current generation. Needs neither root nor the daemon."""

import subprocess

import pytest


def test_map_reader_never_returns_torn_or_expired_slots(nss_build, tmp_path):
    if not nss_build.map_test.exists():
        pytest.skip(f"{nss_build.map_test} not built")
    r = subprocess.run([str(nss_build.map_test), str(tmp_path), "3", "2", "2"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "PASS" in r.stdout, f"{r.stdout}\n{r.stderr}"
