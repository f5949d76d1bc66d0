# SPDX-License-Identifier: BSD-3-Clause
"""Running lookups inside the test namespaces and reading their output: getent, the C client
(tests/nss/nss_client.c) and Python's socket.getaddrinfo."""

import errno
import json
import subprocess
import types

# enum nss_status and h_errno values (nss.h, netdb.h).
NSS_TRYAGAIN, NSS_UNAVAIL, NSS_NOTFOUND, NSS_SUCCESS = -2, -1, 0, 1
HOST_NOT_FOUND, TRY_AGAIN, NO_RECOVERY, NO_DATA, NETDB_INTERNAL = 1, 2, 3, 4, -1
ERANGE, EAGAIN, ENOENT, ECONNREFUSED, EACCES = errno.ERANGE, errno.EAGAIN, errno.ENOENT, errno.ECONNREFUSED, errno.EACCES


class Result:
    def __init__(self, proc):
        self.rc = proc.returncode
        self.out = proc.stdout
        self.err = proc.stderr
        self.lines = [l for l in proc.stdout.splitlines() if l.strip()]

    def values(self, key):
        return [l.split(None, 1)[1] for l in self.lines if l.split(None, 1)[0] == key]

    def value(self, key):
        v = self.values(key)
        return v[0] if v else None

    def __repr__(self):
        return f"rc={self.rc} out={self.out!r} err={self.err!r}"


def getent(ns, *args, nsswitch=None, env=None):
    return Result(ns.run(["getent", *args], nsswitch=nsswitch, env=env))


def getent_hosts(ns, name, nsswitch=None):
    """`getent hosts NAME` -> (address, [names]) or None."""
    r = getent(ns, "hosts", name, nsswitch=nsswitch)
    if r.rc != 0 or not r.lines:
        return None
    parts = r.lines[0].split()
    return parts[0], parts[1:]


def getent_ahosts(ns, name, nsswitch=None):
    """`getent ahosts NAME` -> (set of addresses, canonical name) or None."""
    r = getent(ns, "ahosts", name, nsswitch=nsswitch)
    if r.rc != 0 or not r.lines:
        return None
    addrs = {l.split()[0] for l in r.lines}
    first = r.lines[0].split()
    canon = first[2] if len(first) > 2 else None
    return addrs, canon


def client(ns, build, *args, nsswitch=None, env=None, timeout=30):
    return Result(ns.run([str(build.client), *[str(a) for a in args]], nsswitch=nsswitch, env=env,
                         timeout=timeout))


def direct(ns, build, fn, arg, family="4", buflen=4096, env=None, timeout=30, user=None):
    """Calls _nss_nscache_<fn> from the module itself; status/errno/herrno as ints. `user`: a
    uid to run as (setpriv) instead of root."""
    args = [str(build.client), "direct", str(build.module), fn, arg, family, str(buflen)]
    if user is not None:
        args = ["setpriv", f"--reuid={user}", f"--regid={user}", "--clear-groups", *args]
    r = Result(ns.run(args, env=env, timeout=timeout))
    head = r.lines[0].split() if r.lines else []
    assert len(head) == 6 and head[0] == "status", f"unexpected client output: {r}"
    r.status, r.errno, r.herrno = int(head[1]), int(head[3]), int(head[5])
    return r


def py_getaddrinfo(ns, name, family=0, nsswitch=None):
    code = ("import json,socket,sys\n"
            "try:\n"
            f"    r = socket.getaddrinfo({name!r}, None, {family}, socket.SOCK_STREAM)\n"
            "    print(json.dumps(sorted({x[4][0] for x in r})))\n"
            "except socket.gaierror as e:\n"
            "    print(json.dumps({'error': e.errno}))\n")
    r = ns.run(["/usr/bin/python3", "-c", code], nsswitch=nsswitch)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


class PausedClient:
    """`nss_client pause N gai NAME FAM`: one lookup now (which gets the process its map), N
    more after resume(); meanwhile the test may take the daemon's socket away."""

    def __init__(self, ns, build, n, name, family):
        self.proc = ns.popen([str(build.client), "pause", str(n), "gai", name, family], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline().strip()
        assert line == "ready", f"nss_client pause: {line!r}"

    def resume(self, timeout=30):
        out, err = self.proc.communicate("go\n", timeout=timeout)
        return Result(types.SimpleNamespace(returncode=self.proc.returncode, stdout=out, stderr=err))

