# SPDX-License-Identifier: BSD-3-Clause
"""`make install DESTDIR=...` and `make uninstall DESTDIR=...`: the daemon, the module in the
multiarch library directory, the default config (never overwritten), the systemd unit (checked
with systemd-analyze verify when available) and the sysusers entry land where expected, and
uninstall removes exactly them. Staged only: nothing on the live system is touched."""

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from nsspaths import REPO, build_dir


def multiarch():
    for cmd in (["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], ["gcc", "-print-multiarch"]):
        try:
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=10).stdout.strip()
        except FileNotFoundError:
            continue
        if out:
            return out
    pytest.skip("cannot tell the multiarch triplet")


def make(*args):
    build = build_dir()
    # NO_BUILD=1: install what is built; never relink a binary the rest of the suite runs.
    r = subprocess.run(["make", "-C", str(REPO), *args, f"BUILD={build}", "NO_BUILD=1"], capture_output=True,
                       text=True, timeout=600)
    return r


@pytest.fixture
def stage(tmp_path, nss_build):
    b = build_dir()
    if not (b / "build.ninja").exists() or not (b / "nscache").exists():
        pytest.skip("no configured and built build directory")
    return tmp_path / "stage"


def installed_files(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() or p.is_symlink())


def test_install_and_uninstall(stage):
    r = make("install", f"DESTDIR={stage}")
    assert r.returncode == 0, r.stdout + r.stderr
    triplet = multiarch()
    expected = {
        "usr/local/bin/nscache",
        f"usr/lib/{triplet}/libnss_nscache.so.2",
        "etc/nscache/nscache.toml",
        "usr/local/lib/systemd/system/nscache.service",
        "usr/local/lib/systemd/system/nscache.socket",
        "usr/local/lib/systemd/system/nscache-tcp.socket",
        "usr/local/lib/sysusers.d/nscache.conf",
        "usr/local/share/doc/nscache/nss.md",
        "usr/local/share/doc/nscache/nscache.toml.example",
    }
    assert set(installed_files(stage)) == expected
    assert os.access(stage / "usr/local/bin/nscache", os.X_OK)
    assert (stage / "etc/nscache/nscache.toml").read_text() == (REPO / "nscache.toml.example").read_text()

    module = stage / f"usr/lib/{triplet}/libnss_nscache.so.2"
    dyn = subprocess.run(["readelf", "-d", "--dyn-syms", "-W", str(module)], capture_output=True, text=True).stdout
    assert "Library soname: [libnss_nscache.so.2]" in dyn
    assert "libstdc++" not in dyn
    exported = {l.split()[-1] for l in dyn.splitlines()
                if " FUNC " in l and " GLOBAL " in l and " DEFAULT " in l and " UND " not in l}
    assert exported == {f"_nss_nscache_{f}" for f in ("gethostbyname4_r", "gethostbyname3_r", "gethostbyname2_r",
                                                     "gethostbyname_r", "gethostbyaddr2_r", "gethostbyaddr_r")}

    unit = (stage / "usr/local/lib/systemd/system/nscache.service").read_text()
    # Started as root so the NSS socket's listener is root's (the module trusts no other),
    # then the daemon itself switches to the nscache user.
    for line in ("ExecStart=/usr/local/bin/nscache serve --user nscache", "Restart=on-failure",
                 "RuntimeDirectory=nscache nscd", "NoNewPrivileges=yes", "ProtectSystem=strict",
                 "ProtectHome=yes", "PrivateTmp=yes", "Type=notify"):
        assert line in unit.splitlines(), line
    assert not any(l.startswith("User=") for l in unit.splitlines())
    # nscd's place for hosts: one of them at a time, and the installed config takes its socket.
    assert "Conflicts=nscd.service nscd.socket nsncd.service unscd.service" in unit.splitlines()
    assert 'nscd-socket = "/var/run/nscd/socket"' in (stage / "etc/nscache/nscache.toml").read_text()
    assert "u nscache" in (stage / "usr/local/lib/sysusers.d/nscache.conf").read_text()

    # An existing config is never overwritten, and uninstall keeps an edited one.
    cfg = stage / "etc/nscache/nscache.toml"
    cfg.write_text("# edited\nthreads = 1\n")
    r = make("install", f"DESTDIR={stage}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert cfg.read_text() == "# edited\nthreads = 1\n"

    r = make("uninstall", f"DESTDIR={stage}")
    assert r.returncode == 0, r.stdout + r.stderr
    assert installed_files(stage) == ["etc/nscache/nscache.toml"]
    cfg.unlink()


def test_unit_passes_systemd_analyze_verify(stage, tmp_path):
    tool = shutil.which("systemd-analyze")
    if tool is None:
        pytest.skip("systemd-analyze is not installed")
    r = make("install", f"DESTDIR={stage}")
    assert r.returncode == 0, r.stdout + r.stderr
    try:
        # verify checks that ExecStart exists: point it at the staged binary.
        unit = (stage / "usr/local/lib/systemd/system/nscache.service").read_text()
        unit = unit.replace("ExecStart=/usr/local/bin/nscache", f"ExecStart={stage}/usr/local/bin/nscache")
        copy = tmp_path / "nscache.service"
        copy.write_text(unit)
        v = subprocess.run([tool, "verify", str(copy)], capture_output=True, text=True, timeout=60)
        if v.returncode != 0 and ("Failed to" in v.stderr and "bus" in v.stderr.lower()):
            pytest.skip(f"systemd-analyze verify cannot run here: {v.stderr.strip()}")
        problems = [l for l in v.stderr.splitlines() if str(copy) in l or "nscache.service" in l]
        assert v.returncode == 0 and not problems, v.stdout + v.stderr
    finally:
        make("uninstall", f"DESTDIR={stage}")
