# SPDX-License-Identifier: BSD-3-Clause
"""The Debian packages (debian/): they build from a clean copy of the tree, lintian finds no
error in them, and they install, run, remove and purge in a throwaway root.

The throwaway root is the host's own file system under an overlay whose writable layer is a
tmpfs, inside private mount and network namespaces that one holder process keeps alive: dpkg,
the maintainer scripts, systemd-sysusers and the daemon all run there (through nsenter +
chroot), and when the holder ends every change goes with it. The host's dpkg database, users,
/etc and network are never touched.

Run by .ci/run (and `make deb-test`), not by ctest: building the packages compiles the daemon
once more. NSCACHE_DEB_DIR names a folder where scripts/build-deb already put the packages;
without it the test builds them itself."""

import os
import re
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

# What dpkg, the loader cache, the systemd helpers and user tools keep for themselves: these may
# differ after a purge. Everything else in the writable layer must be gone or byte-identical to
# the host's file.
BOOKKEEPING = (
    "var/lib/dpkg/", "var/log/", "var/cache/", "etc/ld.so.cache",
    "etc/passwd-", "etc/group-", "etc/shadow-", "etc/gshadow-",
    "var/lib/systemd/deb-systemd-helper-enabled/", "var/lib/systemd/deb-systemd-helper-masked/",
    "var/lib/systemd/deb-systemd-user-helper-enabled/",
)

_LO_UP = ("import fcntl,socket,struct; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
          "f=struct.unpack_from(\"H\",fcntl.ioctl(s,0x8913,struct.pack(\"16s24x\",b\"lo\")),16)[0]; "
          "fcntl.ioctl(s,0x8914,struct.pack(\"16sH22x\",b\"lo\",f|1))")


def project_version():
    text = (REPO / "CMakeLists.txt").read_text()
    return re.search(r"project\(nscache VERSION ([0-9.]+)", text).group(1)


def multiarch():
    return subprocess.run(["dpkg-architecture", "-qDEB_HOST_MULTIARCH"], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.fixture(scope="module")
def debs(tmp_path_factory):
    given = os.environ.get("NSCACHE_DEB_DIR")
    out = Path(given) if given else tmp_path_factory.mktemp("debs")
    version = project_version()
    if not (out / f"nscache_{version}_amd64.deb").exists():
        r = subprocess.run([str(REPO / "scripts/build-deb"), str(out)], capture_output=True, text=True,
                           timeout=1800)
        assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    return {"dir": out, "version": version,
            "nscache": out / f"nscache_{version}_amd64.deb",
            "libnss": out / f"libnss-nscache_{version}_amd64.deb",
            "changes": out / f"nscache_{version}_amd64.changes"}


class ThrowawayRoot:
    """The host's root file system under a tmpfs overlay, in private mount and network
    namespaces; `run` executes a shell command chrooted into it."""

    def __init__(self, workdir, debs_dir):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.root = self.workdir / "root"
        w = self.workdir
        script = " && ".join([
            f"mount -t tmpfs tmpfs {w}",
            f"mkdir {w}/upper {w}/work {w}/root",
            f"mount -t overlay overlay -o lowerdir=/,upperdir={w}/upper,workdir={w}/work {w}/root",
            f"mount --rbind /dev {w}/root/dev",
            f"mount -t proc proc {w}/root/proc",
            f"mount -t tmpfs tmpfs {w}/root/run",
            f"mount -t tmpfs tmpfs {w}/root/tmp",
            f"mount --bind -o ro {debs_dir} {w}/root/mnt",
            f"/usr/bin/python3 -c '{_LO_UP}'",
            "echo ready", "exec sleep 3600"])
        self.holder = subprocess.Popen(
            ["unshare", "--mount", "--net", "--propagation", "private", "--", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.holder.stdout.readline().decode().strip()
        if line != "ready":
            self.close()
            err = self.holder.stderr.read().decode()
            raise RuntimeError(f"cannot build the throwaway root (overlayfs over /): {line!r} {err}")

    def command(self, shell, chroot=True):
        base = ["nsenter", "--target", str(self.holder.pid), "--mount", "--net", "--"]
        if chroot:
            base += ["chroot", str(self.root)]
        # A clean environment, as dpkg run by an administrator would have.
        return ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LANG=C.UTF-8",
                "DEBIAN_FRONTEND=noninteractive", *base, "/bin/sh", "-c", shell]

    def run(self, shell, chroot=True, check=True, timeout=120):
        r = subprocess.run(self.command(shell, chroot), capture_output=True, text=True, timeout=timeout)
        if check:
            assert r.returncode == 0, f"{shell}\n{r.stdout}\n{r.stderr}"
        return r

    def exists(self, path):
        return self.run(f"test -e {path} || test -L {path}", check=False).returncode == 0

    def read(self, path):
        return self.run(f"cat {path}").stdout

    def changes(self):
        """What the writable layer holds that the host does not: (kind, path) pairs, leaving out
        folders and files that are the same as the host's, and dpkg's own bookkeeping."""
        # Compared inside the mount namespace, where / is still the host's file system.
        script = (f"cd {self.workdir}/upper && find . -mindepth 1 | while IFS= read -r p; do "
                  "h=\"/${p#./}\"; "
                  "if [ -d \"$p\" ] && [ ! -L \"$p\" ]; then [ -d \"$h\" ] || echo \"new-folder $p\"; "
                  "elif [ -c \"$p\" ]; then echo \"removed $p\"; "
                  "elif [ -L \"$p\" ]; then [ \"$(readlink \"$p\")\" = \"$(readlink \"$h\" 2>/dev/null)\" ] "
                  "|| echo \"link $p\"; "
                  "elif [ -f \"$h\" ] && cmp -s \"$p\" \"$h\"; then :; "
                  "else echo \"file $p\"; fi; done")
        found = []
        for line in self.run(script, chroot=False).stdout.splitlines():
            kind, path = line.split(" ", 1)
            path = path[2:]
            if path.startswith(BOOKKEEPING) or path + "/" in BOOKKEEPING:
                continue
            found.append((kind, path))
        return found

    def close(self):
        if self.holder.poll() is None:
            self.holder.send_signal(signal.SIGTERM)
            try:
                self.holder.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.holder.kill()
                self.holder.wait(timeout=10)


@pytest.fixture
def root(tmp_path, debs):
    if shutil.which("unshare") is None or shutil.which("nsenter") is None:
        pytest.fail("unshare and nsenter (util-linux) are needed")
    r = ThrowawayRoot(tmp_path / "ovl", debs["dir"])
    yield r
    r.close()


def test_versions_agree(debs):
    version = debs["version"]
    changelog = subprocess.run(["dpkg-parsechangelog", "-l", str(REPO / "debian/changelog"), "-S", "Version"],
                               capture_output=True, text=True, check=True).stdout.strip()
    assert changelog == version, "debian/changelog and CMakeLists.txt name different versions"
    assert f'"nscache {version}"' in (REPO / "docs/nscache.8").read_text()


def test_lintian_reports_no_errors(debs):
    r = subprocess.run(["lintian", "--fail-on", "error", "--no-tag-display-limit", str(debs["changes"])],
                       capture_output=True, text=True, timeout=600)
    errors = [l for l in r.stdout.splitlines() if l.startswith("E:")]
    assert r.returncode == 0 and not errors, r.stdout + r.stderr
    # Warnings are named in the README's install section when they cannot be fixed; today none.
    assert not [l for l in r.stdout.splitlines() if l.startswith("W:")], r.stdout


def test_package_contents(debs):
    def listing(deb):
        out = subprocess.run(["dpkg-deb", "-c", str(deb)], capture_output=True, text=True, check=True).stdout
        return {l.split()[-1].lstrip(".") for l in out.splitlines()}

    daemon = listing(debs["nscache"])
    for path in ("/usr/bin/nscache", "/etc/nscache/nscache.toml", "/lib/systemd/system/nscache.service",
                 "/lib/systemd/system/nscache.socket", "/lib/systemd/system/nscache-tcp.socket",
                 "/usr/lib/sysusers.d/nscache.conf", "/usr/share/man/man8/nscache.8.gz",
                 "/usr/share/doc/nscache/copyright", "/usr/share/doc/nscache/nss.md"):
        assert path in daemon, path
    assert f"/usr/lib/{multiarch()}/libnss_nscache.so.2" in listing(debs["libnss"])
    conffiles = subprocess.run(["dpkg-deb", "--ctrl-tarfile", str(debs["nscache"])], capture_output=True,
                               check=True).stdout
    assert b"conffiles" in conffiles
    fields = subprocess.run(["dpkg-deb", "-f", str(debs["libnss"]), "Multi-Arch", "Architecture"],
                            capture_output=True, text=True, check=True).stdout
    assert "Multi-Arch: same" in fields


def test_install_run_remove_purge(root, debs):
    version = debs["version"]
    before = {f: root.read(f"/etc/{f}") for f in ("nsswitch.conf", "resolv.conf") if root.exists(f"/etc/{f}")}
    assert not root.exists("/usr/bin/nscache"), "nscache is installed on this host already"

    r = root.run(f"dpkg -i /mnt/{debs['nscache'].name} /mnt/{debs['libnss'].name}", timeout=300)
    assert "dpkg: error" not in r.stderr, r.stderr

    # Installed: the daemon, the module, the config as a conffile, the unit enabled, the user.
    status = root.run("dpkg-query -W -f '${Status} ${Version}\\n' nscache libnss-nscache").stdout
    assert status.count(f"install ok installed {version}") == 2, status
    assert "/etc/nscache/nscache.toml" in root.run("dpkg-query -W -f '${Conffiles}' nscache").stdout
    assert root.exists(f"/usr/lib/{multiarch()}/libnss_nscache.so.2")
    assert root.exists("/etc/systemd/system/multi-user.target.wants/nscache.service")
    # The DNS sockets systemd holds across restarts (socket activation), enabled too.
    for unit in ("nscache.socket", "nscache-tcp.socket"):
        assert root.exists(f"/etc/systemd/system/sockets.target.wants/{unit}"), unit
    user = root.run("getent passwd nscache").stdout.strip().split(":")
    assert user[5] == "/nonexistent" and user[6].endswith("nologin"), user
    # Neither name service file is touched: the administrator decides.
    for f, text in before.items():
        assert root.read(f"/etc/{f}") == text, f"/etc/{f} changed"
    installed = root.changes()
    assert ("file", "usr/bin/nscache") in installed, installed  # the comparison sees what dpkg put
    assert [c for c in installed if c[1] in ("etc/nsswitch.conf", "etc/resolv.conf")] == []

    # The packaged daemon runs as its unit starts it (root, then --user nscache), with the
    # folders systemd would make (RuntimeDirectory, StateDirectory), in the private network
    # namespace: nothing it could send leaves it.
    root.run("/usr/bin/nscache check-config /etc/nscache/nscache.toml")
    unit = root.read("/lib/systemd/system/nscache.service")
    exec_start = re.search(r"(?m)^ExecStart=(.*)$", unit).group(1)
    assert exec_start == "/usr/bin/nscache serve --user nscache"
    root.run("mkdir -m 0755 /run/nscache && mkdir -p -m 0750 /var/lib/nscache")
    daemon = subprocess.Popen(root.command(f"exec {exec_start} --upstream 127.0.0.2"),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        log = []
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            line = daemon.stdout.readline()
            if not line:
                break
            log.append(line)
            if line.strip() == "info: ready":
                break
        assert log and log[-1].strip() == "info: ready", "".join(log)
        uid = root.run("id -u nscache").stdout.strip()
        status = Path(f"/proc/{daemon.pid}/status").read_text()
        assert re.search(rf"(?m)^Uid:\s+{uid}\s+{uid}\s+{uid}\s+{uid}$", status), status
        assert "cache_entries" in root.run("/usr/bin/nscache stats").stdout
        root.run("/usr/bin/nscache dump before-purge.dump")
        assert root.exists("/var/lib/nscache/before-purge.dump")
    finally:
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
    root.run("rm -rf /run/nscache")  # systemd removes the RuntimeDirectory when it stops

    # Remove keeps the configuration and the user; purge takes everything.
    root.run("dpkg -r nscache libnss-nscache")
    assert root.exists("/etc/nscache/nscache.toml")
    assert not root.exists("/usr/bin/nscache")
    root.run("dpkg -P nscache libnss-nscache")
    assert root.run("getent passwd nscache", check=False).returncode == 2
    assert root.run("getent group nscache", check=False).returncode == 2
    for gone in ("/etc/nscache", "/var/lib/nscache", "/etc/systemd/system/multi-user.target.wants/nscache.service",
                 "/etc/systemd/system/sockets.target.wants/nscache.socket"):
        assert not root.exists(gone), gone
    assert root.changes() == []
