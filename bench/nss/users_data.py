# SPDX-License-Identifier: BSD-3-Clause
"""The data sets of bench/nss/users and the private /etc they are written to.

A data set is /etc/passwd, /etc/group and /etc/services text plus the keys each lookup mode
walks. `stock` is a copy of the host's three files; `10k` adds 10,000 users, each with a
private group, and 1,000 team groups of about 30 members each (three teams a user), as a
directory-backed host has; its services file is the stock one.

PrivateEtc writes only through an overlay mounted over /etc in this process's private mount
namespace: every write first checks that the namespace is not the one the runner started in
and that /etc is still the overlay it mounted, so the host's /etc is never written.
"""

import os
import subprocess

GEN_USERS, GEN_TEAMS, TEAMS_PER_USER = 10000, 1000, 3
GEN_UID0, TEAM_GID0 = 20000, 40000
NEW_UID0 = 50000  # the users the edit-to-visible probe adds (below systemd's 61184-65519)
MODES = ["pwnam", "pwuid", "grnam", "grouplist", "servbyname"]


class DataError(Exception):
    pass


def parse_colon(text, fields):
    rows = []
    for line in text.splitlines():
        if not line or line.startswith(("#", "+", "-")):
            continue
        parts = line.split(":")
        if len(parts) >= fields:
            rows.append(parts)
    return rows


def service_keys(text):
    keys = []
    for line in text.splitlines():
        words = line.split("#", 1)[0].split()
        if len(words) >= 2 and "/" in words[1]:
            keys.append(f"{words[0]}/{words[1].split('/', 1)[1]}")
    return list(dict.fromkeys(keys))


def spread(items, k):
    """At most k items, evenly spaced over the list (all of them when it is shorter)."""
    if len(items) <= k:
        return list(items)
    return [items[i * len(items) // k] for i in range(k)]


def generated(stock_passwd, stock_group):
    users = [f"u{i:05d}:x:{GEN_UID0 + i}:{GEN_UID0 + i}:User {i:05d},,,:/home/u{i:05d}:/bin/bash\n"
             for i in range(GEN_USERS)]
    members = [[] for _ in range(GEN_TEAMS)]
    for i in range(GEN_USERS):
        for t in {(i * m + c) % GEN_TEAMS for m, c in ((1, 0), (7, 3), (13, 5))[:TEAMS_PER_USER]}:
            members[t].append(f"u{i:05d}")
    groups = [f"u{i:05d}:x:{GEN_UID0 + i}:\n" for i in range(GEN_USERS)]
    groups += [f"team{t:04d}:x:{TEAM_GID0 + t}:{','.join(members[t])}\n" for t in range(GEN_TEAMS)]
    return stock_passwd + "".join(users), stock_group + "".join(groups)


class DataSet:
    def __init__(self, name, passwd, group, services, max_keys):
        self.name, self.passwd, self.group, self.services = name, passwd, group, services
        users = parse_colon(passwd, 7)
        groups = parse_colon(group, 4)
        if not users or not groups:
            raise DataError(f"data set {name}: no users or no groups")
        picked = spread(users, max_keys)
        self.keys = {
            "pwnam": [u[0] for u in picked],
            "pwuid": list(dict.fromkeys(u[2] for u in picked)),
            "grnam": [g[0] for g in spread(groups, max_keys)],
            "grouplist": [f"{u[0]}:{u[3]}" for u in picked],
            "servbyname": spread(service_keys(services), max_keys),
        }
        self.counts = {"users": len(users), "groups": len(groups),
                       "members": sum(len([m for m in g[3].split(",") if m]) for g in groups),
                       "services": len(service_keys(services))}

    def write_keys(self, folder):
        os.makedirs(folder, exist_ok=True)
        paths = {}
        for mode, keys in self.keys.items():
            paths[mode] = os.path.join(folder, f"keys-{mode}.txt")
            with open(paths[mode], "w") as f:
                f.writelines(k + "\n" for k in keys)
        for name in ("passwd", "group", "services"):
            with open(os.path.join(folder, name), "w") as f:
                f.write(getattr(self, name))
        return paths


def load_sets(names, max_keys, stock_dir):
    """stock_dir holds the copies of the host's files (taken before the overlay went up)."""
    stock = {}
    for n in ("passwd", "group", "services"):
        with open(os.path.join(stock_dir, n)) as f:
            stock[n] = f.read()
    sets = []
    for name in names:
        if name == "stock":
            sets.append(DataSet("stock", stock["passwd"], stock["group"], stock["services"], max_keys))
        elif name == "10k":
            pw, gr = generated(stock["passwd"], stock["group"])
            sets.append(DataSet("10k", pw, gr, stock["services"], max_keys))
        else:
            raise DataError(f"unknown data set {name}")
    return sets


def mount_ns():
    return os.readlink("/proc/self/ns/mnt")


class PrivateEtc:
    """An overlay over /etc (upper layer on a tmpfs under `scratch`) in a private mount namespace."""

    def __init__(self, scratch, host_mnt_ns):
        self.host_mnt_ns = host_mnt_ns
        if mount_ns() == host_mnt_ns:
            raise DataError("not in a private mount namespace: refusing to mount over /etc")
        os.makedirs(scratch, exist_ok=True)
        subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256m,mode=0755", "tmpfs", scratch], check=True,
                       timeout=30)
        self.upper = os.path.join(scratch, "upper")
        work = os.path.join(scratch, "work")
        os.makedirs(self.upper)
        os.makedirs(work)
        subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                        f"lowerdir=/etc,upperdir={self.upper},workdir={work}", "/etc"], check=True, timeout=30)
        self.check()

    def check(self):
        if mount_ns() == self.host_mnt_ns:
            raise DataError("the mount namespace is the host's: refusing to write /etc")
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if fields[4] == "/etc" and f"upperdir={self.upper}," in line and " - overlay " in line:
                    return
        raise DataError("/etc is not the benchmark's overlay: refusing to write it")

    def write(self, name, text):
        """Rewrite /etc/NAME in place (the same inode: what an editor that truncates does)."""
        self.check()
        path = os.path.join("/etc", name)
        with open(path, "r+" if os.path.exists(path) else "w") as f:
            f.seek(0)
            f.write(text)
            f.truncate()

    def append(self, name, text):
        self.check()
        with open(os.path.join("/etc", name), "a") as f:
            f.write(text)

    def replace(self, name, text):
        """Write /etc/NAME+ and rename it over /etc/NAME, as useradd and vipw do."""
        self.check()
        tmp = os.path.join("/etc", name + "+")
        with open(tmp, "w") as f:
            f.write(text)
        os.rename(tmp, os.path.join("/etc", name))

    def read(self, name):
        with open(os.path.join("/etc", name)) as f:
            return f.read()
