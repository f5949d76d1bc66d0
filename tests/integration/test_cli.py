# SPDX-License-Identifier: BSD-3-Clause
"""The command line: exit codes, messages, check-config, query."""

import os
import re
import signal
import socket
import subprocess

import pytest

from harness import REPO, ZONE, stop_process, big_txt_strings, clean_env
from dnshelpers import a_addrs, run, udp


def serve_expect_exit(nscache, args, tmp_path, dead, timeout=10):
    """Run `nscache serve` with `args` that should make it exit at once. Safe defaults keep a
    misbehaving daemon on loopback with a dead upstream and a private control socket."""
    full = [nscache, "serve"]
    if "--listen" not in args:
        full += ["--listen", "127.0.0.1:0"]
    if "--upstream" not in args:
        full += ["--upstream", dead.addr]
    if "--control" not in args:
        full += ["--control", str(tmp_path / "cli-control.sock")]
    full += args
    p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=clean_env(),
                         stdin=subprocess.DEVNULL)
    try:
        out, err = p.communicate(timeout=timeout)
        return p.returncode, out, err
    except subprocess.TimeoutExpired:
        pass
    stop_process(p)
    out, err = p.communicate(timeout=5)
    pytest.fail(f"`{' '.join(full)}` kept running (expected an exit)\nstderr:\n{err}")


def test_version(nscache):
    r = run([nscache, "--version"])
    assert r.returncode == 0, r.stderr
    assert re.search(r"\d+\.\d+", r.stdout + r.stderr), r.stdout


def test_help(nscache):
    r = run([nscache, "--help"])
    assert r.returncode == 0
    text = r.stdout + r.stderr
    for sub in ("serve", "query", "stats", "flush", "check-config", "invalidate"):
        assert sub in text


def test_unknown_subcommand(nscache):
    r = run([nscache, "frobnicate"])
    assert r.returncode == 2 and r.stderr.strip()


@pytest.mark.parametrize("args,mentions", [
    (["--no-such-flag"], "--no-such-flag"),
    (["--threads"], "--threads"),
    (["--threads", "many"], "many"),
    (["--listen", "999.1.1.1:53"], "999.1.1.1"),
    (["--listen", "127.0.0.1:70000"], "70000"),
    (["--listen", "::1:53"], "::1:53"),
    (["--upstream", "300.0.0.1"], "300.0.0.1"),
    (["--upstream", "127.0.0.1:notaport"], "notaport"),
    (["--cache-size", "12X"], "12X"),
])
def test_serve_bad_arguments_exit_2(nscache, tmp_path, dead_upstream, args, mentions):
    code, out, err = serve_expect_exit(nscache, args, tmp_path, dead_upstream())
    assert code == 2, f"exit {code} for {args}\nstderr:\n{err}"
    assert mentions in err, f"the message should name {mentions!r}:\n{err}"


BAD_CONFIGS = [
    # (id, text, bad line)
    ("threads_string", 'threads = 2\n# ok so far\nthreads = "two"\n', 3),
    ("cache_size", '# sizes\ncache-size = "lots"\n', 2),
    ("listen_addr", 'listen = ["999.1.1.1:53"]\n', 1),
    ("allow_cidr", '\n\nallow = ["127.0.0.0/33"]\n', 3),
    ("duration", 'query-timeout = "soon"\n', 1),
    ("rate_action", 'rate-limit = 10\nrate-limit-action = "explode"\n', 2),
    ("negative_ttl", 'min-ttl = 0\nmax-ttl = -5\n', 2),
    ("toml_syntax", 'threads = 2\nmax-ttl = = 5\nmin-ttl = 0\n', 2),
    ("boolean", 'prefetch = "maybe"\n', 1),
    ("state_dir_relative", 'state-dir = "var/lib/nscache"\n', 1),
    ("metrics_allow_cidr", 'metrics-allow = ["127.0.0.1/40"]\n', 1),
]


@pytest.mark.parametrize("text,line", [(c[1], c[2]) for c in BAD_CONFIGS], ids=[c[0] for c in BAD_CONFIGS])
def test_check_config_bad_value(nscache, tmp_path, text, line):
    path = tmp_path / "nscache-bad.toml"
    path.write_text(text)
    r = run([nscache, "check-config", str(path)])
    assert r.returncode == 2, f"exit {r.returncode}\n{r.stdout}{r.stderr}"
    assert re.search(rf"nscache-bad\.toml:{line}\b", r.stderr + r.stdout), \
        f"the message should name nscache-bad.toml:{line}:\n{r.stderr}{r.stdout}"


def test_serve_bad_config_exit_2(nscache, tmp_path, dead_upstream):
    path = tmp_path / "nscache-bad.toml"
    path.write_text('threads = 1\nmax-ttl = "forever"\n')
    code, out, err = serve_expect_exit(nscache, ["--config", str(path)], tmp_path, dead_upstream())
    assert code == 2, err
    assert re.search(r"nscache-bad\.toml:2\b", err), err


def test_check_config_example(nscache):
    r = run([nscache, "check-config", str(REPO / "nscache.toml.example")])
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_config_good_file(nscache, tmp_path):
    path = tmp_path / "good.toml"
    path.write_text('listen = ["127.0.0.1:5353", "[::1]:5353"]\nupstream = ["127.0.0.1:5300"]\n'
                    'cache-size = "16M"\nquery-timeout = "1500ms"\nmax-ttl = 3600\n'
                    'allow = ["127.0.0.0/8", "::1/128", "10.0.0.0/8"]\n')
    r = run([nscache, "check-config", str(path)])
    assert r.returncode == 0, r.stdout + r.stderr


def test_check_config_missing_file(nscache, tmp_path):
    r = run([nscache, "check-config", str(tmp_path / "absent.toml")])
    assert r.returncode != 0
    assert "absent.toml" in r.stderr + r.stdout


def _occupy(proto, port=0):
    if proto == "udp":
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    else:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.0.1", port))
    if proto == "tcp":
        s.listen(1)
    return s


@pytest.mark.parametrize("busy", ["udp", "tcp", "both"])
def test_port_in_use_exit_1(nscache, tmp_path, dead_upstream, busy):
    held = []
    try:
        for _ in range(20):
            first = _occupy("udp" if busy != "tcp" else "tcp")
            port = first.getsockname()[1]
            held = [first]
            if busy == "both":
                try:
                    held.append(_occupy("tcp", port))
                except OSError:
                    first.close()
                    held = []
                    continue
            break
        assert held
        code, out, err = serve_expect_exit(nscache, ["--listen", f"127.0.0.1:{port}"], tmp_path, dead_upstream())
        assert code == 1, f"exit {code}, want 1\n{err}"
        assert "cannot bind" in err and str(port) in err, err
    finally:
        for s in held:
            s.close()


def test_query_subcommand(daemon, nsd, nscache):
    d = daemon(nsd.addr)
    server = f"127.0.0.1:{d.port}"
    r = run([nscache, "query", "--server", server, f"www.{ZONE}", "A"])
    assert r.returncode == 0, r.stderr
    assert "192.0.2.1" in r.stdout
    r = run([nscache, "query", "--server", server, f"dual.{ZONE}", "AAAA"])
    assert r.returncode == 0 and "2001:db8::3" in r.stdout
    r = run([nscache, "query", "--server", server, f"www.{ZONE}"])  # TYPE defaults to A
    assert r.returncode == 0 and "192.0.2.1" in r.stdout
    r = run([nscache, "query", "--server", server, f"nope.{ZONE}", "A"])
    assert r.returncode == 0, "an answer came back, whatever its RCODE"
    assert "NXDOMAIN" in r.stdout + r.stderr
    r = run([nscache, "query", "--server", server, "--tcp", f"big.{ZONE}", "TXT"])
    assert r.returncode == 0
    for s in big_txt_strings():
        assert s in r.stdout


def test_query_timeout_exit_1(nscache, dead_upstream):
    dead = dead_upstream()
    r = run([nscache, "query", "--server", dead.addr, "www.example.test", "A"], timeout=40)
    assert r.returncode == 1, r.stdout + r.stderr


@pytest.mark.parametrize("sub", [["stats"], ["stats", "--json"], ["flush"], ["flush", "x.test"]])
def test_client_without_daemon_exit_1(nscache, tmp_path, sub):
    sock = tmp_path / "nobody-home.sock"
    r = run([nscache] + sub[:1] + ["--control", str(sock)] + sub[1:])
    assert r.returncode == 1, r.stdout + r.stderr
    assert "nobody-home.sock" in r.stderr + r.stdout


def test_dump_and_load_names_are_the_daemons_not_the_cwd(daemon, fake_upstream, tmp_path, nscache):
    """`nscache dump FILE` sends FILE as given: a relative name lands in the daemon's
    state-dir, never in the client's working directory."""
    fake_upstream.add("cwd.fake.test.", "A", 300, "192.0.2.83")
    state = tmp_path / "state"
    cwd = tmp_path / "cwd"
    state.mkdir()
    cwd.mkdir()
    d = daemon(fake_upstream.addr, config=f'state-dir = "{state}"\n')
    udp(d.port, "cwd.fake.test")
    r = run([nscache, "dump", "--control", d.control, "rel.dump"], cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert (state / "rel.dump").is_file() and not (cwd / "rel.dump").exists()
    assert str(state / "rel.dump") in r.stdout, r.stdout
    r = run([nscache, "load", "--control", d.control, "rel.dump"], cwd=cwd)
    assert r.returncode == 0 and "loaded 1 entries" in r.stdout, r.stdout + r.stderr


def test_sigint_clean_exit(daemon, nsd):
    d = daemon(nsd.addr)
    d.stopped_by_test = True
    os.kill(d.pid, signal.SIGINT)
    code = d.proc.wait(timeout=5)
    assert code == 0, d.stderr_text()


def test_dig_through_daemon(daemon, nsd):
    d = daemon(nsd.addr)
    for transport in ([], ["+tcp"]):
        r = run(["dig", "@127.0.0.1", "-p", str(d.port), "+time=3", "+tries=1"] + transport +
                [f"alias.{ZONE}", "A"])
        assert r.returncode == 0, r.stderr
        assert "status: NOERROR" in r.stdout
        assert "CNAME" in r.stdout and "192.0.2.1" in r.stdout
    r = run(["kdig", "@127.0.0.1", "-p", str(d.port), "+time=3", "+retry=0", f"nope.{ZONE}", "A"])
    assert r.returncode == 0 and "NXDOMAIN" in r.stdout, r.stdout + r.stderr


def test_startup_log_format(daemon, nsd):
    d = daemon(nsd.addr, listen=("127.0.0.1:0", "[::1]:0"))
    lines = d.stderr_text().splitlines()
    assert sum(1 for l in lines if l == "info: ready") == 1
    ready_at = lines.index("info: ready")
    listening = [l for l in lines[:ready_at] if l.startswith("info: listening on ")]
    assert len(listening) == 4, listening
    assert d.listening[("udp", "127.0.0.1")] == d.listening[("tcp", "127.0.0.1")]
    assert d.listening[("udp", "::1")] == d.listening[("tcp", "::1")]
    for l in lines:
        assert re.match(r"^(debug|info|notice|warning|error|critical): \S", l), f"log line not `LEVEL: message`: {l!r}"


@pytest.mark.threaded
@pytest.mark.parametrize("threads", [None, 0, 1, 3])
def test_thread_counts(daemon, nsd, threads):
    d = daemon(nsd.addr, threads=threads)
    for _ in range(3):
        assert a_addrs(udp(d.port, f"www.{ZONE}")) == ["192.0.2.1"]


def test_lists_from_config_file(daemon, fake_upstream):
    fake_upstream.add("cfg.fake.test.", "A", 300, "192.0.2.120")
    d = daemon([], listen=(), config=f'listen = ["127.0.0.1:0"]\nupstream = ["{fake_upstream.addr}"]\n')
    assert a_addrs(udp(d.port, "cfg.fake.test")) == ["192.0.2.120"]


def test_flags_replace_config_lists(daemon, fake_upstream, dead_upstream):
    fake_upstream.add("flag.fake.test.", "A", 300, "192.0.2.121")
    dead = dead_upstream()
    busy = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    busy.bind(("127.0.0.1", 0))
    try:
        cfg = f'listen = ["127.0.0.1:{busy.getsockname()[1]}"]\nupstream = ["{dead.addr}"]\n'
        d = daemon(fake_upstream.addr, config=cfg)  # --listen 127.0.0.1:0 --upstream fake
        assert d.port != busy.getsockname()[1]
        r = udp(d.port, "flag.fake.test", timeout=5)
        assert a_addrs(r) == ["192.0.2.121"]
        dead.sock.setblocking(False)
        try:
            got = dead.sock.recv(4096)
        except BlockingIOError:
            got = None
        assert got is None, "the config file's upstream was used although --upstream replaced it"
        addrs = [u["address"] for u in d.stats()["upstreams"]]
        assert len(addrs) == 1 and str(fake_upstream.port) in str(addrs[0]), addrs
    finally:
        busy.close()


def test_ipv6_upstream(daemon, make_fake):
    f6 = make_fake("::1")
    f6.add("v6up.fake.test.", "A", 300, "192.0.2.122")
    d = daemon(f6.addr)
    assert a_addrs(udp(d.port, "v6up.fake.test", timeout=5)) == ["192.0.2.122"]
    assert f6.count(name="v6up.fake.test") == 1


def test_upstream_default_port_53_accepted(daemon):
    # `--upstream ADDR` without a port means port 53. Nothing is asked, so nothing is sent.
    d = daemon(["127.0.0.9"])
    ups = d.stats()["upstreams"]
    assert len(ups) == 1 and str(ups[0]["address"]).endswith(":53"), ups


def _not_regular_files(tmp_path):
    """A FIFO (which blocks whoever opens it for reading), a symlink to one, and /dev/zero
    (which never ends)."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    link = tmp_path / "link.toml"
    link.symlink_to(fifo)
    return [(str(fifo), "FIFO"), (str(link), "FIFO"), ("/dev/zero", "character device")]


def test_check_config_refuses_what_is_not_a_regular_file(nscache, tmp_path):
    for path, kind in _not_regular_files(tmp_path):
        r = run([nscache, "check-config", path], timeout=10)
        assert r.returncode == 2, f"exit {r.returncode} for {path}\n{r.stdout}{r.stderr}"
        assert f"not a regular file (a {kind})" in r.stderr, r.stderr
        assert path in r.stderr, r.stderr


def test_resolv_file_that_is_not_a_regular_file_is_refused(nscache, tmp_path):
    for i, (path, kind) in enumerate(_not_regular_files(tmp_path)):
        config = tmp_path / f"resolv{i}.toml"
        config.write_text(f'resolv-file = "{path}"\n')
        full = [nscache, "serve", "--listen", "127.0.0.1:0", "--config", str(config),
                "--control", str(tmp_path / "cli-control.sock"),
                "--nss-socket", str(tmp_path / "nss.sock")]
        p = subprocess.Popen(full, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=clean_env(), stdin=subprocess.DEVNULL)
        try:
            out, err = p.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            stop_process(p)
            p.communicate(timeout=5)
            pytest.fail(f"resolv-file = {path}: the daemon kept running")
        assert p.returncode == 2, f"exit {p.returncode} for {path}\n{err}"
        assert f"{path} cannot be read: not a regular file (a {kind})" in err, err


@pytest.mark.parametrize("sub,synopsis", [
    ("serve", "serve [--config FILE]"),
    ("query", "query [--server ADDR:PORT] [--tcp] NAME [TYPE]"),
    ("stats", "stats [--control PATH] [--json]"),
    ("flush", "flush [--control PATH] [NAME]"),
    ("reload", "reload [--control PATH]"),
    ("dump", "dump [--control PATH] FILE"),
    ("load", "load [--control PATH] FILE"),
    ("check-config", "check-config FILE"),
    ("invalidate", "invalidate [--nscd-socket PATH] [--config FILE] passwd|group|services|hosts"),
])
def test_help_after_a_command_prints_its_usage(nscache, sub, synopsis):
    # After any other argument too: `serve --help` used to say "--help needs a value".
    for args in (["--help"], ["-h"], ["--control", "/nonexistent", "--help"], ["x", "-h"]):
        r = run([nscache, sub] + args, timeout=10)
        assert r.returncode == 0, f"{sub} {args}: exit {r.returncode}\n{r.stdout}{r.stderr}"
        assert r.stdout.startswith(f"usage: nscache {synopsis}"), f"{sub} {args}: {r.stdout!r}"
        assert r.stderr == "", f"{sub} {args}: {r.stderr!r}"
