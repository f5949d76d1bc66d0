# SPDX-License-Identifier: BSD-3-Clause
"""Shared pieces of nscache's benchmark kit (bench/run, and later bench/soak and the NSS bench).

Everything here is bounded in time: every wait has a deadline, every child process is tracked
and stopped by PID (its own process group, which it leads) on exit, on failure and on
SIGINT/SIGTERM/SIGHUP. Traffic goes to 127.0.0.1 only.
"""

import json
import os
import random
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class BenchError(Exception):
    pass


class Interrupted(BaseException):
    """Raised by the signal handlers after every child has been stopped."""

    def __init__(self, signum):
        super().__init__(f"signal {signum}")
        self.signum = signum


# ---------------------------------------------------------------- network namespace

def ensure_netns(argv, enabled=True):
    """Re-exec this script inside a new network namespace with only loopback (up).

    Whatever a target tries (root priming, security polling), no packet can leave the
    machine. Needs root (CAP_SYS_ADMIN). The PID stays the same (unshare execs)."""
    if not enabled or os.environ.get("BENCH_IN_NETNS") == "1":
        if os.environ.get("BENCH_IN_NETNS") == "1":
            subprocess.run(["ip", "link", "set", "lo", "up"], check=True, timeout=10)
        return
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        raise BenchError("unshare and ip are needed for the private network namespace "
                         "(or pass --no-netns)")
    os.environ["BENCH_IN_NETNS"] = "1"
    os.execvp("unshare", ["unshare", "--net", "--", sys.executable, os.path.abspath(argv[0])] + argv[1:])


# ---------------------------------------------------------------- processes

RUNNING = set()  # load generators running now (killed by Procs.stop_all on a signal)


class Procs:
    """Children started by the benchmark, each in its own session (pgid == pid)."""

    def __init__(self):
        self.live = {}  # pid -> (name, Popen, logfile)

    def start(self, name, argv, cpu=None, env=None, log_path=None, cwd=None, pass_fds=()):
        if cpu is not None:
            argv = ["taskset", "-c", str(cpu)] + list(argv)
        logf = open(log_path, "ab") if log_path else subprocess.DEVNULL
        full_env = dict(os.environ)
        if env:
            full_env.update({k: str(v) for k, v in env.items()})
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=subprocess.STDOUT,
                             env=full_env, cwd=cwd or REPO, start_new_session=True, pass_fds=pass_fds)
        self.live[p.pid] = (name, p, logf)
        return p

    def signal(self, p, sig):
        if p.pid in self.live and p.poll() is None:
            try:
                os.killpg(p.pid, sig)
            except ProcessLookupError:
                pass

    def stop(self, p, grace=10.0):
        """SIGCONT+SIGTERM to the child's process group, SIGKILL after `grace` seconds."""
        entry = self.live.pop(p.pid, None)
        if entry is None:
            return None
        name, _, logf = entry
        if p.poll() is None:
            for sig in (signal.SIGCONT, signal.SIGTERM):
                try:
                    os.killpg(p.pid, sig)
                except ProcessLookupError:
                    break
            try:
                p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                log(f"{name} (pid {p.pid}) ignored SIGTERM for {grace:.0f}s: SIGKILL")
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait(timeout=10)
        # the group may hold forked children (nsd's server processes)
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if logf not in (None, subprocess.DEVNULL):
            logf.close()
        return p.returncode

    def stop_all(self):
        for p in list(RUNNING):  # a load generator in progress
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in list(self.live):
            _, p, _ = self.live[pid]
            try:
                self.stop(p, grace=5.0)
            except Exception as e:  # keep stopping the others
                log(f"stopping pid {pid}: {e}")


def install_signal_handlers(procs):
    def handler(signum, _frame):
        log(f"signal {signum}: stopping every process started")
        procs.stop_all()
        raise Interrupted(signum)
    for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)


# ---------------------------------------------------------------- /proc readings

def cpu_ticks(pid):
    """utime + stime of the whole process (all threads), in clock ticks."""
    with open(f"/proc/{pid}/stat") as f:
        data = f.read()
    fields = data[data.rindex(")") + 2:].split()
    return int(fields[11]) + int(fields[12])


def cpu_seconds(pid):
    return cpu_ticks(pid) / CLK_TCK


def rss_bytes(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no VmRSS for pid {pid}")


def machine_info():
    info = {"kernel": os.uname().release, "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu_model"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as f:
            info["mem_total_kb"] = int(f.readline().split()[1])
    except OSError:
        pass
    return info


# ---------------------------------------------------------------- DNS on loopback

def dns_query(port, qname, qtype=1, timeout=1.0, host="127.0.0.1"):
    """One UDP query; returns the RCODE, or None on timeout. Loopback only."""
    if not host.startswith("127."):
        raise BenchError("benchmark traffic goes to 127.0.0.0/8 only")
    qid = random.randrange(65536)
    wire = struct.pack(">HHHHHH", qid, 0x0100, 1, 0, 0, 0)
    for label in qname.rstrip(".").split("."):
        wire += bytes([len(label)]) + label.encode()
    wire += b"\0" + struct.pack(">HH", qtype, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.settimeout(timeout)
        s.sendto(wire, (host, port))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                data, _ = s.recvfrom(4096)
            except (socket.timeout, ConnectionRefusedError):
                return None
            if len(data) >= 12 and struct.unpack(">H", data[:2])[0] == qid:
                return data[3] & 0x0F
        return None
    finally:
        s.close()


def wait_dns_ready(port, proc, name, timeout=60.0, qname="ready-probe.bench."):
    """Poll until the server at port answers anything, the process dies, or timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise BenchError(f"{name} exited with status {proc.returncode} while starting")
        if dns_query(port, qname, timeout=0.3) is not None:
            return
        time.sleep(0.1)
    raise BenchError(f"{name} did not answer on 127.0.0.1:{port} within {timeout:.0f}s")


# ---------------------------------------------------------------- zones and NSD

def ensure_zones(zdir, names, nsd_port, storms=None):
    """Run gen-zones unless zdir already holds zones made with the same parameters."""
    meta_path = os.path.join(zdir, "zones.json")
    args = [os.path.join(HERE, "gen-zones"), "--out", zdir, "--names", str(names),
            "--nsd-port", str(nsd_port)]
    for s in storms or []:
        args += ["--storm", s]
    try:
        with open(meta_path) as f:
            meta = json.load(f)
        same = (meta.get("names") == names and meta.get("nsd_port") == nsd_port and
                (not storms or [f"{s['zone']}:{s['count']}:{s['ttl']}:{s['rate']}" for s in meta["storms"]] == storms))
        if same and os.path.exists(os.path.join(zdir, "tls", "ca.pem")) and \
                "tls-port" in open(os.path.join(zdir, "nsd.conf")).read():
            return meta
    except (OSError, ValueError, KeyError):
        pass
    log(f"generating zones in {zdir} ({names} names)")
    subprocess.run(args, check=True, timeout=600)
    with open(meta_path) as f:
        return json.load(f)


def start_nsd(procs, zdir, port, cpu, log_path, timeout=180.0):
    p = procs.start("nsd", ["nsd", "-d", "-c", os.path.join(zdir, "nsd.conf")], cpu=cpu, log_path=log_path)
    wait_dns_ready(port, p, "nsd", timeout=timeout, qname="n0.bench.")
    return p


# ---------------------------------------------------------------- load generators

_DNSPERF_FIELDS = {
    "sent": r"Queries sent:\s+(\d+)",
    "completed": r"Queries completed:\s+(\d+)",
    "lost": r"Queries lost:\s+(\d+)",
    "runtime_s": r"Run time \(s\):\s+([\d.]+)",
    "qps": r"Queries per second:\s+([\d.]+)",
    "avg_latency_s": r"Average Latency \(s\):\s+([\d.]+)",
    "max_latency_s": r"Average Latency \(s\):.*max ([\d.]+)",
}


def run_measured(argv, cpu, timeout, log_path=None):
    """Run a load generator to completion (bounded by timeout); return (stdout, stderr,
    wall seconds). Its CPU time shows in children_cpu() once it has been reaped."""
    if cpu is not None:
        argv = ["taskset", "-c", str(cpu)] + list(argv)
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                         start_new_session=True)
    RUNNING.add(p)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate(timeout=10)
        raise BenchError(f"{' '.join(argv[:4])} ran past its {timeout:.0f}s limit")
    finally:
        RUNNING.discard(p)
    wall = time.monotonic() - t0
    out, err = out.decode(errors="replace"), err.decode(errors="replace")
    if log_path:
        with open(log_path, "a") as f:
            f.write("$ " + " ".join(argv) + "\n" + out + err + "\n")
    if p.returncode != 0:
        raise BenchError(f"{' '.join(argv[:6])} ... exited {p.returncode}: {err.strip()[-400:]}")
    return out, err, wall


def children_cpu():
    r = os.times()
    return r.children_user + r.children_system


def dnsperf(port, datafile, cpu, seconds=None, maxruns=None, outstanding=100, timeout_s=2,
            clients=1, qps_limit=None, log_path=None, hard_limit=None):
    """Run dnsperf against 127.0.0.1:port; returns a dict of its statistics, plus
    rcodes {name: count}, noerror, and lg_cpu_s (dnsperf's own CPU seconds)."""
    argv = ["dnsperf", "-s", "127.0.0.1", "-p", str(port), "-d", datafile, "-q", str(outstanding),
            "-t", str(timeout_s), "-c", str(clients), "-b", "4096"]
    if seconds:
        argv += ["-l", str(seconds)]
    if maxruns:
        argv += ["-n", str(maxruns)]
    if qps_limit:
        argv += ["-Q", str(qps_limit)]
    if hard_limit is None:
        hard_limit = (seconds or 600) + timeout_s + 60
    c0 = children_cpu()
    out, err, wall = run_measured(argv, cpu, hard_limit, log_path)
    lg_cpu = children_cpu() - c0
    text = out + err
    res = {"wall_s": wall, "lg_cpu_s": lg_cpu}
    for key, rx in _DNSPERF_FIELDS.items():
        m = re.search(rx, text)
        res[key] = float(m.group(1)) if m else 0.0
    for k in ("sent", "completed", "lost"):
        res[k] = int(res[k])
    rcodes = {}
    m = re.search(r"Response codes:\s+(.*)", text)
    if m:
        for name, n in re.findall(r"([A-Z]+) (\d+) \(", m.group(1)):
            rcodes[name] = int(n)
    res["rcodes"] = rcodes
    res["noerror"] = rcodes.get("NOERROR", 0)
    if res["completed"] == 0 and res["sent"] == 0:
        raise BenchError(f"dnsperf sent nothing: {text.strip()[-400:]}")
    return res


def loadgen(binary, port, names, rate, duration, cpu, csv_path, count=None, order="random",
            timeout_ms=1000, sockets=4, seed=1, log_path=None):
    """Run bench/build/loadgen; returns (rows as dicts, summary dict)."""
    argv = [binary, "--server", f"127.0.0.1:{port}", "--rate", str(rate), "--duration", str(duration),
            "--order", order, "--timeout-ms", str(timeout_ms), "--sockets", str(sockets),
            "--seed", str(seed), "--csv", csv_path]
    for n in names:
        argv += ["--names", n]
    if count:
        argv += ["--count", str(count)]
    c0 = children_cpu()
    _, err, wall = run_measured(argv, cpu, duration + timeout_ms / 1000 + 60, log_path)
    m = re.search(r"^summary (.*)$", err, re.M)
    if not m:
        raise BenchError(f"loadgen printed no summary: {err.strip()[-400:]}")
    summary = {k: int(v) if re.fullmatch(r"-?\d+", v) else float(v)
               for k, v in (kv.split("=", 1) for kv in m.group(1).split())}
    summary["wall_s"] = wall
    summary["lg_cpu_s"] = children_cpu() - c0
    rows = read_csv(csv_path)
    return rows, summary


def read_csv(path):
    with open(path) as f:
        header = f.readline().strip().split(",")
        rows = []
        for line in f:
            parts = line.strip().split(",")
            if len(parts) == len(header):
                rows.append({h: (float(v) if "." in v else int(v)) for h, v in zip(header, parts)})
    return rows


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(fmt_cell(r.get(h, "")) for h in header) + "\n")


def fmt_cell(v):
    if isinstance(v, float):
        return f"{v:.4f}".rstrip("0").rstrip(".") if v == v else "nan"
    return str(v)


def median(values):
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    n = len(vals)
    return vals[n // 2] if n % 2 else (vals[n // 2 - 1] + vals[n // 2]) / 2


def slice_names(src, dst, start, count, shuffle_seed=None):
    """Write lines [start, start+count) of src to dst (optionally shuffled); returns count written."""
    out = []
    with open(src) as f:
        for i, line in enumerate(f):
            if i >= start + count:
                break
            if i >= start:
                out.append(line)
    if shuffle_seed is not None:
        random.Random(shuffle_seed).shuffle(out)
    with open(dst, "w") as f:
        f.writelines(out)
    return len(out)
