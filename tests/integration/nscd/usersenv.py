# SPDX-License-Identifier: BSD-3-Clause
"""The user databases of the nscd user-database tests (test_nscd_users.py): the namespaces'
own /etc/passwd, /etc/group and /etc/services (several users, groups with several members, a
user in several groups), the nsswitch.conf lines they are tried with, the test NSS module's
configuration, and the raw nscd requests the tests send themselves."""

import os
from pathlib import Path

PASSWD = """root:x:0:0:root:/root:/bin/bash
daemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin
alice:x:1001:1001:Alice Liddell,Room 1,,:/home/alice:/bin/bash
bob:x:1002:1002:Bob:/home/bob:/bin/sh
carol:x:1003:1003::/home/carol:/usr/sbin/nologin
dave:x:1004:100:Dave,,,:/home/dave:/bin/bash
nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin
"""

GROUP = """root:x:0:
daemon:x:1:
users:x:100:alice,bob,carol,dave
alice:x:1001:
bob:x:1002:
carol:x:1003:
staff:x:2000:alice,bob
dev:x:2001:alice,carol,dave
ops:x:2002:bob
empty:x:2003:
nogroup:x:65534:
""" + "big:x:3000:" + ",".join([f"member{i:03d}" for i in range(150)] + ["alice"]) + "\n"

SERVICES = """# the test's own services
ftp\t\t21/tcp
ssh\t\t22/tcp
domain\t\t53/tcp
domain\t\t53/udp
kerberos\t88/tcp\t\tkerberos5 krb5 kerberos-sec
kerberos\t88/udp\t\tkerberos5 krb5 kerberos-sec
http\t\t80/tcp\t\twww
https\t\t443/tcp
https\t\t443/udp
testsvc\t\t6000/udp\ttsvc
"""

# The test NSS module (libnss_nscachetest.so.2) reads /etc/nscachetest.conf (the namespaces'
# own) on every call: users and groups only it knows.
MODULE_CONF = """user modonly 5001 5001 Module-only /home/modonly /bin/sh
group modgrp 5001 modonly,alice
"""


def nsswitch(passwd="files", group=None, services="files"):
    group = group or passwd
    return (f"passwd: {passwd}\ngroup: {group}\nshadow: files\nhosts: files dns\n"
            f"networks: files\nprotocols: files\nservices: {services}\n")


# glibc's nscd request type (nscd/nscd-client.h) the scripts below are given; every request
# starts with (version 2, type, key length), INVALIDATE is type 10.
GETPWBYNAME = 0


def write_file(path, text, how="rename"):
    """Writes `path` as an admin's tool would: "rename" writes a new file beside it and renames
    it over (useradd, vipw, adduser); "inplace" truncates and rewrites the same inode."""
    path = Path(path)
    if how == "inplace":
        with open(path, "w") as f:
            f.write(text)
        return
    tmp = path.with_name(path.name + "+")
    with open(tmp, "w") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.rename(tmp, path)


# Run inside the namespaces: asks REQUEST TYPE KEY on COUNT connections opened at once (sent
# on all before any reply is read); prints one line per connection with the monotonic time
# it finished (a reply or the daemon closing it) and its `found` field ("-" without a reply).
# The first line, "sent T", is printed (and flushed) once every request is on its way.
CONCURRENT = r"""
import select, socket, struct, sys, time
path, rtype, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[4])
keys = [sys.argv[3].replace("{i}", str(i)).encode() + b"\0" for i in range(count)]
conns = []
for k in keys:
    s = socket.socket(socket.AF_UNIX)
    s.connect(path)
    s.sendall(struct.pack("iii", 2, rtype, len(k)) + k)
    conns.append(s)
time.sleep(0.2)  # the daemon has read them all
print("sent", time.monotonic(), flush=True)
pending = {s: b"" for s in conns}
done = []
deadline = time.monotonic() + float(sys.argv[5])
while pending and time.monotonic() < deadline:
    ready, _, _ = select.select(list(pending), [], [], 0.1)
    for s in ready:
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        got = pending[s] + data
        if data and len(got) < 8:
            pending[s] = got
            continue
        found = struct.unpack_from("ii", got)[1] if len(got) >= 8 else "-"
        done.append((time.monotonic(), found))
        del pending[s]
        s.close()
for t, found in done:
    print(t, found)
for s in pending:
    print("pending -")
"""

# Run inside the namespaces: COUNT GETPWBYNAME requests one after another for distinct names
# (PREFIX<i>); prints how many were answered "not found" (found == 0).
FLOOD = r"""
import socket, struct, sys
path, prefix, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
notfound = 0
for i in range(count):
    k = f"{prefix}{i}".encode() + b"\0"
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    try:
        s.connect(path)
        s.sendall(struct.pack("iii", 2, 0, len(k)) + k)
        head = s.recv(36)
        notfound += len(head) >= 8 and struct.unpack_from("ii", head)[1] == 0
    except OSError:
        pass
    s.close()
print(notfound)
"""

# Run inside the namespaces: INVALIDATE DATABASE; prints the reply in hex ("" when the daemon
# closed the connection without one).
INVALIDATE_SCRIPT = r"""
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
s.connect(sys.argv[1])
db = sys.argv[2].encode() + b"\0"
s.sendall(struct.pack("iii", 2, 10, len(db)) + db)
try:
    print(s.recv(16).hex())
except OSError:
    print("")
"""
