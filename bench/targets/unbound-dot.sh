#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# unbound forwarding over DNS over TLS to the benchmark NSD's TLS port (issue 11), otherwise
# as targets/unbound.sh; BENCH_UPSTREAM_TLS_PORT and BENCH_TLS_CA come from bench/run.
# Environment (set by bench/run): BENCH_PORT, BENCH_UPSTREAM_PORT, BENCH_WORKDIR.
# Runs in the foreground; the PID of this script becomes unbound's (exec).
set -eu
conf="$BENCH_WORKDIR/unbound.conf"
cat > "$conf" <<CONF
server:
    interface: 127.0.0.1
    port: $BENCH_PORT
    do-ip6: no
    do-daemonize: no
    chroot: ""
    username: ""
    directory: "$BENCH_WORKDIR"
    pidfile: "$BENCH_WORKDIR/unbound.pid"
    use-syslog: no
    logfile: ""
    verbosity: 1
    num-threads: 1
    access-control: 127.0.0.0/8 allow
    do-not-query-localhost: no
    outgoing-interface: 127.0.0.1
    module-config: "iterator"
    msg-cache-size: 1g
    rrset-cache-size: 2g
    msg-cache-slabs: 1
    rrset-cache-slabs: 1
    infra-cache-slabs: 1
    key-cache-slabs: 1
    num-queries-per-thread: 4096
    outgoing-range: 8192
    so-rcvbuf: 8m
    so-sndbuf: 8m
    tls-cert-bundle: "$BENCH_TLS_CA"
remote-control:
    control-enable: no
forward-zone:
    name: "."
    forward-tls-upstream: yes
    forward-addr: 127.0.0.1@$BENCH_UPSTREAM_TLS_PORT#bench.test
CONF
exec unbound -d -c "$conf"
