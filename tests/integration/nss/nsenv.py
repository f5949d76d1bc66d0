# SPDX-License-Identifier: BSD-3-Clause
"""A private world for glibc: a network namespace with its own loopback (so a test DNS server
can own 127.0.0.1:53, the only port glibc's `dns` module uses) and a mount namespace where
/etc/resolv.conf, /etc/hosts and /etc/nsswitch.conf are the test's own files (bind mounts;
the host's files are never touched). One holder process keeps the namespaces alive; every
client runs in them through nsenter, with the module found through LD_LIBRARY_PATH (glibc
dlopens NSS modules by bare name, so LD_LIBRARY_PATH applies).

The nscache daemon itself stays in the host's network namespace: the module reaches it over a
unix socket path and a map file, which no network namespace hides."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from harness import stop_process  # tests/integration, on sys.path through its conftest

NSD_BIN = shutil.which("nsd") or "/usr/sbin/nsd"


# Brings the new namespace's loopback up (SIOCGIFFLAGS, then SIOCSIFFLAGS with IFF_UP), so the
# tests need no iproute2.
_LO_UP = ("import fcntl,socket,struct; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
          "f=struct.unpack_from(\"H\",fcntl.ioctl(s,0x8913,struct.pack(\"16s24x\",b\"lo\")),16)[0]; "
          "fcntl.ioctl(s,0x8914,struct.pack(\"16sH22x\",b\"lo\",f|1))")


class Namespace:
    def __init__(self, workdir, module_dir, resolv_conf, hosts, nsswitch, private_run=False,
                 whole_etc=False):
        self.workdir = Path(workdir)
        self.module_dir = str(module_dir)
        self.etc = self.workdir / "etc"
        if whole_etc:
            # A copy of the host's /etc mounted over /etc as a whole: the test's files can then
            # be edited in place and replaced by rename (as useradd and vipw do), which a file
            # bind mount refuses (EBUSY).
            shutil.copytree("/etc", self.etc, symlinks=True, ignore_dangling_symlinks=True)
            for f in ("resolv.conf", "hosts", "nsswitch.conf"):
                (self.etc / f).unlink(missing_ok=True)
        self.etc.mkdir(parents=True, exist_ok=True)
        (self.etc / "resolv.conf").write_text(resolv_conf)
        (self.etc / "hosts").write_text(hosts)
        (self.etc / "nsswitch.conf").write_text(nsswitch)
        self.env = {}  # extra environment for clients (NSCACHE_NSS_SOCKET, ...)
        mounts = " && ".join(
            f'mount --bind {self.etc / f} /etc/{f}' for f in ("resolv.conf", "hosts", "nsswitch.conf"))
        if whole_etc:
            mounts = f"mount --bind {self.etc} /etc"
        # A host nscd would answer before any NSS module: hide its socket directory.
        hide_nscd = "{ [ -d /var/run/nscd ] && mount -t tmpfs tmpfs /var/run/nscd || true; }"
        if private_run:
            # A /run of its own (/var/run/nscd included), for a daemon that takes nscd's place
            # in these namespaces only.
            hide_nscd = "{ mount -t tmpfs tmpfs /run && mkdir -p /run/nscd; }"
        script = f"/usr/bin/python3 -c '{_LO_UP}' && {mounts} && {hide_nscd} && echo ready && exec sleep 3600"
        self.holder = subprocess.Popen(
            ["unshare", "--net", "--mount", "--propagation", "private", "--", "sh", "-c", script],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.holder.stdout.readline().decode().strip()
        if line != "ready":
            err = self.holder.stderr.read().decode() if self.holder.poll() is not None else ""
            stop_process(self.holder)
            raise RuntimeError(f"could not create the test namespaces: {line!r} {err}")
        self.pid = self.holder.pid
        self.processes = []

    def nsswitch_file(self, hosts_line):
        """A file with this `hosts:` line, for run(..., nsswitch=...)."""
        name = "nsswitch-" + "".join(c if c.isalnum() else "_" for c in hosts_line) + ".conf"
        path = self.etc / name
        path.write_text(_nsswitch_text(hosts_line))
        return path

    def argv(self, cmd, nsswitch=None, env=None):
        full_env = {"LD_LIBRARY_PATH": self.module_dir, **self.env, **(env or {})}
        inner = ["env"] + [f"{k}={v}" for k, v in full_env.items()] + list(cmd)
        if nsswitch is not None:
            # A nested mount namespace per command: this command's own nsswitch.conf.
            inner = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c",
                     'mount --bind "$0" /etc/nsswitch.conf && exec "$@"', str(nsswitch)] + inner
        return ["nsenter", "-t", str(self.pid), "--net", "--mount", "--"] + inner

    def run(self, cmd, nsswitch=None, env=None, timeout=30, check=False):
        r = subprocess.run(self.argv(cmd, nsswitch, env), capture_output=True, text=True, timeout=timeout)
        if check and r.returncode != 0:
            raise AssertionError(f"{cmd} exited {r.returncode}: {r.stdout}{r.stderr}")
        return r

    def popen(self, cmd, **kw):
        """A long-running process inside the namespaces (stopped by stop())."""
        proc = subprocess.Popen(self.argv(cmd), **kw)
        self.processes.append(proc)
        return proc

    def stop(self):
        for proc in self.processes:
            stop_process(proc)
        stop_process(self.holder)


def _nsswitch_text(hosts_line):
    return ("passwd: files\ngroup: files\nshadow: files\n"
            f"hosts: {hosts_line}\n"
            "networks: files\nprotocols: files\nservices: files\n")


def nsswitch_text(hosts_line):
    return _nsswitch_text(hosts_line)


class NsdInNamespace:
    """NSD on 127.0.0.1:53 inside the test network namespace: the server glibc's own `dns`
    module asks once nscache is out of the way."""

    def __init__(self, ns, workdir, zones):
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        zone_conf = ""
        for name, text in zones.items():
            (self.workdir / f"{name}.zone").write_text(text)
            zone_conf += f'zone:\n    name: "{name}"\n    zonefile: "{self.workdir}/{name}.zone"\n'
        w = self.workdir
        conf = w / "nsd.conf"
        conf.write_text(f"""server:
    ip-address: 127.0.0.1
    port: 53
    do-ip6: no
    username: ""
    chroot: ""
    zonesdir: "{w}"
    pidfile: "{w}/nsd.pid"
    zonelistfile: "{w}/zone.list"
    xfrdfile: "{w}/xfrd.state"
    xfrdir: "{w}"
    database: ""
    logfile: "{w}/nsd.log"
    server-count: 1
    verbosity: 1
    hide-version: yes
    reuseport: no
    minimal-responses: yes
remote-control:
    control-enable: no
{zone_conf}""")
        self.log = open(w / "nsd-stderr.log", "w")
        self.proc = ns.popen([NSD_BIN, "-d", "-c", str(conf)], stdout=self.log, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL)
        self.ns = ns

    def wait_answering(self, name, timeout=10):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            r = self.ns.run(["dig", "@127.0.0.1", "-p", "53", "+short", "+time=1", "+tries=1", name, "A"],
                            timeout=10)
            if r.returncode == 0 and r.stdout.strip():
                return True
            if self.proc.poll() is not None:
                break
            time.sleep(0.2)
        return False

    def log_text(self):
        out = ""
        for f in ("nsd-stderr.log", "nsd.log"):
            if (self.workdir / f).exists():
                out += (self.workdir / f).read_text()
        return out
