# SPDX-License-Identifier: BSD-3-Clause
"""The summary (markdown) of bench/nss/users: lookups per second per data set, the ratios to
nscd, the edit-to-visible probe, and the issue 18 target (nscache >= 1.0x nscd on every figure)."""

import benchlib as bl

TITLE = {"files": "no cache (files)", "nscd": "nscd", "nscd-sized": "nscd, sized", "nscache": "nscache"}
CALL = {"pwnam": "getpwnam", "pwuid": "getpwuid", "grnam": "getgrnam", "grouplist": "getgrouplist",
        "servbyname": "getservbyname"}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def prime_above(n):
    n = max(n, 3) | 1
    while any(n % d == 0 for d in range(3, int(n ** 0.5) + 1, 2)):
        n += 2
    return n


def fmt(v):
    return "–" if v is None else f"{v:,.0f}"


def ratio(x, y):
    return x / y if x is not None and y else None


def fr(r):
    return "–" if r is None else f"{r:.2f}x"


def syscall_table(syscalls, a):
    L = ["## Socket connects per 1,000 warm calls (strace -c, one thread, 2,000 calls)\n",
         "0 means every call was answered from the map with no system call on the socket.\n"]
    setups = list(dict.fromkeys(s["setup"] for s in syscalls))
    L.append("| data set | call | " + " | ".join(TITLE[s] for s in setups) + " |")
    L.append("|---|---|" + "---:|" * len(setups))
    for ds in dict.fromkeys(s["dataset"] for s in syscalls):
        for mode in a.modes:
            cells = []
            for st in setups:
                r = next((x for x in syscalls if x["dataset"] == ds and x["setup"] == st and x["mode"] == mode), None)
                cells.append("–" if r is None else f"{1000 * r['connects'] / r['calls']:g}")
            L.append(f"| {ds} | {CALL[mode]} | " + " | ".join(cells) + " |")
    return L + [""]


def instructions_table(instr, a):
    L = ["## Instructions per warm call (callgrind, one thread; lower is better)\n",
         "The difference between runs of 1,000 and 11,000 calls (no cache: 20 and 120), over the calls "
         "between: the client's whole cost, glibc's map lookup included, free of the machine's noise.\n"]
    setups = list(dict.fromkeys(x["setup"] for x in instr))
    extra = ["nscache / nscd", "nscache / nscd, sized"] if "nscache" in setups else []
    L.append("| data set | call | " + " | ".join(TITLE[s] for s in setups + []) + "".join(f" | {e}" for e in extra) +
             " |")
    L.append("|---|---|" + "---:|" * (len(setups) + len(extra)))
    for ds in dict.fromkeys(x["dataset"] for x in instr):
        for mode in a.modes:
            v = {x["setup"]: x["per_call"] for x in instr if x["dataset"] == ds and x["mode"] == mode}
            cells = [fmt(v.get(s)) for s in setups]
            if extra:  # a ratio of costs: above 1.0x nscache executes more than nscd
                cells += [fr(ratio(v.get("nscache"), v.get(x))) for x in ("nscd", "nscd-sized")]
            L.append(f"| {ds} | {CALL[mode]} | " + " | ".join(cells) + " |")
    return L + [""]


def summary(res, rows, visible, syscalls, instr, a):
    L = [f"# nscache user-database benchmark (issue 18) — {a.mode} mode, {res['started_utc']} UTC\n"]
    if a.repeats < 5 or a.seconds < 1:
        L.append(f"**{a.seconds:g} s per figure, {a.repeats} repeat(s): a short run; the figures are noisy.**\n")
    m = res["machine"]
    L += [f"Command: `{res['command']}`  ",
          f"Machine: {m.get('cpu_model', '?')}, {m.get('cpus')} CPUs, kernel {m.get('kernel')}; daemon on CPU "
          f"{a.server_cpu}, a 1-thread client on CPU {a.client_cpu}, 2 threads unpinned; load average "
          f"{res['loadavg_start']} at the start, {res.get('loadavg_end', '?')} at the end; the run took "
          f"{res.get('wall_s', 0) / 60:.1f} min  ",
          f"Each figure: the median of {a.repeats} run(s) of {a.seconds:g} s, each with a fresh daemon warmed "
          "first (every key asked once), round robin over the keys; every measured call is a hit except in "
          "`no cache`.  ",
          "Versions: " + ", ".join(f"{k} {v}" for k, v in res.get("versions", {}).items()) + "\n"]
    setups = [s for s in a.setups if any(r["setup"] == s for r in rows)]
    worst = []
    for ds, info in res.get("datasets_info", {}).items():
        L.append(f"## Data set `{ds}`: {info['users']:,} users, {info['groups']:,} groups ({info['members']:,} "
                 f"members), {info['services']:,} services\n")
        L.append("Keys walked: " + ", ".join(f"{CALL[k]} {v:,}" for k, v in info["keys"].items()) + "\n")
        hdr = ["call", "threads"] + [TITLE[s] for s in setups] + ["nscache / nscd", "nscache / nscd, sized",
                                                                   "nscache / no cache"]
        L.append("| " + " | ".join(hdr) + " |")
        L.append("|---|---:|" + "---:|" * (len(setups) + 3))
        for mode in a.modes:
            for t in a.threads:
                vals = {s: bl.median([r["per_s"] for r in rows if r["dataset"] == ds and r["setup"] == s and
                                      r["mode"] == mode and r["threads"] == t]) for s in setups}
                rs = [ratio(vals.get("nscache"), vals.get(x)) for x in ("nscd", "nscd-sized", "files")]
                for r, against in zip(rs[:2], ("nscd", "nscd, sized")):
                    if r is not None:
                        worst.append((r, f"{ds} {CALL[mode]} {t} thr vs {against}"))
                L.append("| " + " | ".join([CALL[mode], str(t)] + [fmt(vals[s]) for s in setups] +
                                           [fr(r) for r in rs]) + " |")
        L.append("")
    if instr:
        L += instructions_table(instr, a)
    if syscalls:
        L += syscall_table(syscalls, a)
    if visible:
        L.append("## Edit to visible: a new user appended to /etc/passwd, until getpwnam finds it\n")
        L.append("A running client (pw_bench --wait-for) polls every 10 ms; the time runs from the end of the edit "
                 f"to the first call that finds the user, bounded at {a.visible_timeout:g} s. \"after a negative\": "
                 "the client asked for the name (not found) before the edit.\n")
        L.append("| data set | setup | in place | in place, after a negative | by rename | by rename, after a "
                 "negative |")
        L.append("|---|---|---:|---:|---:|---:|")
        for ds in dict.fromkeys(v["dataset"] for v in visible):
            for s in dict.fromkeys(v["setup"] for v in visible if v["dataset"] == ds):
                cells = []
                for how in ("in place", "rename"):
                    for neg in (False, True):
                        v = next((x for x in visible if x["dataset"] == ds and x["setup"] == s and
                                  x["how"] == how and x["negative_first"] == neg), None)
                        cells.append("–" if v is None else (f"not within {a.visible_timeout:g} s"
                                                            if v["seconds"] is None else f"{v['seconds']:.3f} s"))
                L.append(f"| {ds} | {TITLE[s]} | " + " | ".join(cells) + " |")
        L.append("")
    L.append("## Issue 18 targets\n")
    L.append("| target | measured | |")
    L.append("|---|---|---|")
    w = min(worst) if worst else None
    L.append("| nscache at least as fast as nscd on every figure (≥ 1.0x) | " +
             (f"lowest {w[0]:.2f}x ({w[1]}) | {'met' if w[0] >= 1.0 else 'missed'} |" if w else "– | n/a |"))
    costs = [(ratio(x["per_call"], y["per_call"]), f"{x['dataset']} {CALL[x['mode']]} vs {TITLE[y['setup']]}")
             for x in instr if x["setup"] == "nscache" for y in instr
             if y["setup"] in ("nscd", "nscd-sized") and (y["dataset"], y["mode"]) == (x["dataset"], x["mode"])]
    c = max(costs) if costs else None
    if c:
        L.append("| nscache executes no more instructions a warm call than nscd (callgrind, ≤ 1.0x; the figure "
                 f"free of the machine's noise) | highest {c[0]:.2f}x ({c[1]}) | {'met' if c[0] <= 1.005 else 'missed'} |")
    ns = [v for v in visible if v["setup"] == "nscache"]
    if ns:
        late = [v["seconds"] for v in ns]
        ok = all(x is not None and x <= 1.0 for x in late)
        L.append("| an edit of /etc/passwd visible within 1 s (nscache) | " +
                 ("slowest " + (f"{max(late):.3f} s" if ok or None not in late else "not within the bound")) +
                 f" | {'met' if ok else 'missed'} |")
    L.append("")
    fails = [r for r in rows if r.get("failures")]
    if fails:
        L.append("## Failures\n")
        L += [f"- {r['dataset']} r{r['repeat']} {r['setup']} {r['mode']} threads={r['threads']}: {r['failures']} "
              f"failed: {r.get('first_failure', '')}" for r in fails] + [""]
    if res["unavailable"] or res["notes"] or res["errors"]:
        L.append("## Notes and errors\n")
        L += [f"- {TITLE.get(s, s)} not available: {why}" for s, why in res["unavailable"].items()]
        L += [f"- {n}" for n in res["notes"] if "not available" not in n]
        L += [f"- ERROR: {e}" for e in res["errors"]] + [""]
    L.append("Raw data: runs.csv (every run), results.json (with each daemon's statistics); logs/ has each "
             "daemon's log and every pw_bench command; data/ the files and keys of each data set.")
    return "\n".join(L) + "\n"
